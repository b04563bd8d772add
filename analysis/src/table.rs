//! [`Table`]: a titled grid of [`Cell`]s printed aligned as text, as JSON
//! arrays, or as CSV.

use serde::{Deserialize, Serialize};

use crate::json::JVal;
use crate::AnalysisError;

/// One table cell. Floats carry their number of decimals so that every
/// output is fixed-format and byte-stable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Cell {
    Empty,
    Text(String),
    Int(i64),
    UInt(u64),
    Float { value: f64, decimals: u8 },
}

impl Cell {
    /// A float printed with `decimals` digits after the point.
    pub fn float(value: f64, decimals: u8) -> Cell {
        Cell::Float { value, decimals }
    }

    /// Text form used by the text and CSV outputs.
    pub fn render(&self) -> String {
        match self {
            Cell::Empty => String::new(),
            Cell::Text(s) => s.clone(),
            Cell::Int(v) => v.to_string(),
            Cell::UInt(v) => v.to_string(),
            Cell::Float { value, decimals } => fmt_float(*value, *decimals),
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::UInt(_) | Cell::Float { .. })
    }

    pub(crate) fn to_jval(&self) -> JVal {
        match self {
            Cell::Empty => JVal::Null,
            Cell::Text(s) => JVal::Str(s.clone()),
            Cell::Int(v) => JVal::Int(i128::from(*v)),
            Cell::UInt(v) => JVal::Int(i128::from(*v)),
            Cell::Float { value, decimals } => JVal::Fixed(*value, *decimals),
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_string())
    }
}
impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}
impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::UInt(v)
    }
}
impl From<i64> for Cell {
    fn from(v: i64) -> Self {
        Cell::Int(v)
    }
}
impl From<u32> for Cell {
    fn from(v: u32) -> Self {
        Cell::UInt(u64::from(v))
    }
}

/// Fixed-point float formatting; a value that is not a number (a mean of
/// nothing, a change relative to zero) prints as `n/a`, infinities as `inf`
/// and `-inf`.
pub(crate) fn fmt_float(v: f64, decimals: u8) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        let s = format!("{:.*}", usize::from(decimals), v);
        // Avoid "-0.00".
        if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
            s[1..].to_string()
        } else {
            s
        }
    }
}

/// A titled table. Column names carry units (`latency_us_p99`, `iops`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table with the given columns.
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; it must have one cell per column.
    pub fn push_row(&mut self, row: Vec<Cell>) -> Result<(), AnalysisError> {
        if row.len() != self.columns.len() {
            return Err(AnalysisError::TableShape {
                title: self.title.clone(),
                row: self.rows.len(),
                cells: row.len(),
                columns: self.columns.len(),
            });
        }
        self.rows.push(row);
        Ok(())
    }

    fn check(&self) -> Result<(), AnalysisError> {
        for (i, r) in self.rows.iter().enumerate() {
            if r.len() != self.columns.len() {
                return Err(AnalysisError::TableShape {
                    title: self.title.clone(),
                    row: i,
                    cells: r.len(),
                    columns: self.columns.len(),
                });
            }
        }
        Ok(())
    }

    /// Aligned text: the title, a header, a dashed rule, then rows. Numbers
    /// are right-aligned, text left-aligned; columns are two spaces apart.
    pub fn to_text(&self) -> Result<String, AnalysisError> {
        self.check()?;
        let rendered: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(Cell::render).collect())
            .collect();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for r in &rendered {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..self.columns.len())
            .map(|j| {
                !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r[j].is_numeric() || r[j] == Cell::Empty)
            })
            .collect();
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&self.title);
            out.push('\n');
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (j, c) in cells.iter().enumerate() {
                if j > 0 {
                    s.push_str("  ");
                }
                let pad = widths[j] - c.chars().count();
                if numeric[j] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.columns, &mut out);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &rendered {
            line(r, &mut out);
        }
        Ok(out)
    }

    /// CSV with a header row (RFC 4180 quoting via the `csv` crate).
    pub fn to_csv(&self) -> Result<String, AnalysisError> {
        self.check()?;
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        w.write_record(&self.columns)
            .map_err(|e| AnalysisError::Csv(e.to_string()))?;
        for r in &self.rows {
            w.write_record(r.iter().map(Cell::render))
                .map_err(|e| AnalysisError::Csv(e.to_string()))?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| AnalysisError::Csv(e.to_string()))?;
        String::from_utf8(bytes).map_err(|e| AnalysisError::Csv(e.to_string()))
    }

    /// JSON object `{"title", "columns": [...], "rows": [[...], ...]}` with
    /// numbers as JSON numbers (fixed decimals) and text as strings.
    pub(crate) fn to_jval(&self) -> JVal {
        JVal::Obj(vec![
            ("title".into(), JVal::Str(self.title.clone())),
            (
                "columns".into(),
                JVal::Arr(self.columns.iter().map(|c| JVal::Str(c.clone())).collect()),
            ),
            (
                "rows".into(),
                JVal::Arr(
                    self.rows
                        .iter()
                        .map(|r| JVal::Arr(r.iter().map(Cell::to_jval).collect()))
                        .collect(),
                ),
            ),
        ])
    }

    /// The table as a JSON text (same layout as the fio-style JSON output).
    pub fn to_json(&self) -> Result<String, AnalysisError> {
        self.check()?;
        let mut s = self.to_jval().render();
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new("dm variants", &["variant", "iops", "lat_us_mean"]);
        t.push_row(vec![
            "pmem0".into(),
            12_300_000u64.into(),
            Cell::float(0.75, 2),
        ])
        .unwrap();
        t.push_row(vec![
            "linear, \"percpu\"".into(),
            4_321_000u64.into(),
            Cell::float(2.605, 2),
        ])
        .unwrap();
        t
    }

    #[test]
    fn text_is_aligned() {
        let s = sample().to_text().unwrap();
        let expected = "dm variants\n\
variant               iops  lat_us_mean\n\
----------------  --------  -----------\n\
pmem0             12300000         0.75\n\
linear, \"percpu\"   4321000         2.60\n";
        assert_eq!(s, expected);
    }

    #[test]
    fn csv_quotes() {
        let s = sample().to_csv().unwrap();
        assert_eq!(s, "variant,iops,lat_us_mean\npmem0,12300000,0.75\n\"linear, \"\"percpu\"\"\",4321000,2.60\n");
    }

    #[test]
    fn json_arrays() {
        let s = sample().to_json().unwrap();
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["rows"][0][1], serde_json::json!(12300000));
        assert_eq!(v["rows"][1][2].as_f64(), Some(2.60));
        assert_eq!(v["columns"][2], "lat_us_mean");
    }

    #[test]
    fn shape_errors() {
        let mut t = Table::new("t", &["a", "b"]);
        let e = t.push_row(vec![Cell::UInt(1)]).unwrap_err().to_string();
        assert!(e.contains("row 0 has 1 cells"), "{e}");
    }
}
