//! blocksim's root library: the input loaders the `sim` binary shares with
//! the integration tests and the cargo-fuzz targets in `fuzz/`.
//!
//! * [`scenario`]: scenario TOML files, `--set` overrides, `extends` and
//!   `[[variant]]`s, loaded into [`blocksim_models::Scenario`]s
//!   ([`scenario::load`], [`scenario::Loaded`]);
//! * [`fiojob`]: fio job files (INI) turned into `[[job]]` option maps
//!   ([`fiojob::parse_job_text`]).
//!
//! ```
//! use std::path::Path;
//! let jobs = blocksim::fiojob::parse_job_text(
//!     Path::new("example.fio"),
//!     "[global]\nioengine=libaio\ndirect=1\n[randread]\nrw=randread\nbs=4k\nfilename=/dev/sda\n",
//! )
//! .unwrap();
//! assert_eq!(jobs.len(), 1);
//! assert_eq!(jobs[0]["rw"], "randread");
//! ```

pub mod calibrate;
pub mod fiojob;
pub mod fioresult;
pub mod input;
pub mod scenario;
