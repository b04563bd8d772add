//! Reading the text of scenario and job files: a size bound, UTF-8 with
//! the line and column of the first bad byte, and problems listed at once.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};

/// Largest scenario or job file accepted (a scenario is a few KiB).
const FILE_BYTES_MAX: u64 = 16 << 20;

/// Reads a text file with a size bound and a clear error.
pub fn read_text(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("{}: cannot read the file", path.display()))?;
    if meta.len() > FILE_BYTES_MAX {
        bail!(
            "{}: file is {} bytes; scenario and job files are limited to {} bytes",
            path.display(),
            meta.len(),
            FILE_BYTES_MAX
        );
    }
    let bytes =
        std::fs::read(path).with_context(|| format!("{}: cannot read the file", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let (line, col) = line_col_of_offset_bytes(e.as_bytes(), e.utf8_error().valid_up_to());
        anyhow!(
            "{}:{line}:{col}: the file is not valid UTF-8",
            path.display()
        )
    })
}

/// 1-based line and column of byte `offset` in `bytes`.
pub(crate) fn line_col_of_offset_bytes(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}

/// One problem on its own; several under a count, one per line.
pub fn list_problems(lines: &[String]) -> String {
    match lines {
        [one] => one.clone(),
        _ => format!("{} problems:\n  {}", lines.len(), lines.join("\n  ")),
    }
}
