//! The workload: fio's job options ([`job`], [`job_ext`]), the offsets a job
//! draws ([`offsets`]) and the filesystem its files live on ([`fs`]).

pub mod fs;
pub mod job;
pub mod job_ext;
pub mod offsets;
pub mod opt;
