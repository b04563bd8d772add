//! Devices: the leaves of a stack, each behind the [`device::BlockDevice`]
//! interface.
//!
//! A new device is a file here implementing `BlockDevice`, with its
//! `[[section]]` in `config.rs` and its assembly in `machine/backing.rs` or
//! `machine/stack/build.rs`. [`faults`] holds the decorators that wrap any
//! device; [`limits`] what a device accepts from a layer above.

pub mod device;
pub mod faults;
pub mod generic;
pub mod hdd;
pub mod limits;
pub mod pmem;
pub mod ssd;
