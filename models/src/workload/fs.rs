//! The filesystem between a job and a block device: ext4 with one file laid
//! out contiguously (a preallocated benchmark file has a handful of extents;
//! the per-I/O extent lookup is charged by the `fs_lookup` cost path).

use blocksim_sim::units::Bytes;
use serde::{Deserialize, Serialize};

/// `[filesystem]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FsConfig {
    /// Mount point: job filenames under it are files on this filesystem.
    pub mount: String,
    /// The stack device it lives on.
    #[serde(deserialize_with = "crate::devices::device::de_device")]
    pub device: String,
    /// Where the benchmark file's data starts on the device.
    #[serde(default)]
    pub file_start: Bytes,
}

impl FsConfig {
    /// Whether `filename` names a file on this filesystem.
    pub fn holds(&self, filename: &str) -> bool {
        let m = self.mount.trim_end_matches('/');
        filename.len() > m.len() + 1
            && filename.starts_with(m)
            && filename.as_bytes()[m.len()] == b'/'
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_prefix() {
        let f = FsConfig {
            mount: "/mnt/".into(),
            device: "bcache0".into(),
            file_start: Bytes(0),
        };
        assert!(f.holds("/mnt/rw4k"));
        assert!(!f.holds("/mnt"));
        assert!(!f.holds("/mntx/a"));
    }
}
