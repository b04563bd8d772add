//! [`TraceError`]: every error names the file and the byte offset or line.

use std::path::PathBuf;

/// An error while opening or reading a trace. Every variant names the file;
/// record-level errors also name the byte offset (binary formats) or the
/// 1-based line number (text formats).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The operating system failed to open or read the file.
    /// Its message includes the operating system's, which is therefore not
    /// also its `source` (an error chain would print it twice).
    #[error("{path}: {error}")]
    Io {
        /// File being read.
        path: PathBuf,
        /// Underlying error.
        error: std::io::Error,
    },
    /// A malformed binary record (bad magic, truncated record or payload,
    /// unknown action).
    #[error("{path}: byte offset {offset}: {message}")]
    Record {
        /// File being read.
        path: PathBuf,
        /// Byte offset of the start of the bad record.
        offset: u64,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A malformed text line (bad field, unknown operation).
    #[error("{path}: line {line}: {message}")]
    Line {
        /// File being read.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The file as a whole cannot be read: unknown or unsupported format.
    #[error("{path}: {message}")]
    Format {
        /// File being read.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl TraceError {
    /// True for errors confined to one record or line, which `--lenient`
    /// skips (and counts); false for errors that end the read.
    pub fn is_record_level(&self) -> bool {
        matches!(self, TraceError::Record { .. } | TraceError::Line { .. })
    }

    pub(crate) fn record(path: &std::path::Path, offset: u64, message: impl Into<String>) -> Self {
        TraceError::Record {
            path: path.to_path_buf(),
            offset,
            message: message.into(),
        }
    }

    pub(crate) fn line(path: &std::path::Path, line: u64, message: impl Into<String>) -> Self {
        TraceError::Line {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    pub(crate) fn format(path: &std::path::Path, message: impl Into<String>) -> Self {
        TraceError::Format {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.to_path_buf(),
            error: source,
        }
    }
}
