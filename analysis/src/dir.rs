//! A data direction, as fio names them.

use serde::{Deserialize, Serialize};

/// A data direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dir {
    #[default]
    Read,
    Write,
    Trim,
}

impl Dir {
    /// fio's lower-case name (`read`, `write`, `trim`).
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}
