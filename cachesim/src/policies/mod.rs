//! Replacement policies. Each one implements [`crate::CachePolicy`]; sizes are in cost
//! units (see [`crate::Unit`]): 1 per object in the object view, bytes in the byte view.
//!
//! Unless stated otherwise a policy follows libCacheSim's `cache_get_base` flow:
//! look up (updating metadata on a hit); on a miss, refuse objects larger than the cache,
//! evict until the object fits, then insert. Parameters default to libCacheSim's.

pub mod arc;
pub mod bcache;
pub mod belady;
pub mod clock;
pub mod fifo;
pub mod lirs;
pub mod lru;
pub mod s3fifo;
pub mod sieve;
pub mod twoq;
pub mod wtinylfu;
