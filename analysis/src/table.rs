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

/// The widest text table [`Table::to_text_fit`] prints as given; a wider
/// one is printed transposed when that fits.
pub const TEXT_WIDTH: usize = 100;

/// A titled table. Column names carry units (`latency_us_p99`, `iops`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Text output only: runs of two or more consecutive rows that are zero
    /// in all of these columns print as one line (see [`ZeroFold`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_zero_rows: Option<ZeroFold>,
}

/// Which rows of a table fold into one text line: those whose cells in
/// `columns` are all zero. The line reads `<first column>s A-B: <label>`
/// (e.g. `queues 16-31: no I/O`), A and B the first cells of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ZeroFold {
    pub columns: Vec<usize>,
    pub label: String,
}

impl Cell {
    fn is_zero(&self) -> bool {
        match self {
            Cell::Int(v) => *v == 0,
            Cell::UInt(v) => *v == 0,
            Cell::Float { value, .. } => *value == 0.0,
            Cell::Empty | Cell::Text(_) => false,
        }
    }
}

impl Table {
    /// An empty table with the given columns.
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            fold_zero_rows: None,
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
    /// Rows named by [`Table::fold_zero_rows`] fold into one line per run.
    pub fn to_text(&self) -> Result<String, AnalysisError> {
        self.check()?;
        Ok(self.aligned())
    }

    /// [`Table::to_text`], but a table wider than [`TEXT_WIDTH`] is printed
    /// transposed (one line per column, one column per row) when that fits:
    /// for comparisons whose columns are many metrics of a few rows.
    pub fn to_text_fit(&self) -> Result<String, AnalysisError> {
        let text = self.to_text()?;
        let width = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        if width(&text) > TEXT_WIDTH {
            if let Some(t) = self.transposed() {
                let tt = t.aligned();
                if width(&tt) <= TEXT_WIDTH {
                    return Ok(tt);
                }
            }
        }
        Ok(text)
    }

    /// The table turned a quarter: its first column's name, then each row's
    /// first cell, as the header; one row per other column. None for a
    /// table without rows or with folded rows.
    fn transposed(&self) -> Option<Table> {
        if self.rows.is_empty() || self.fold_zero_rows.is_some() {
            return None;
        }
        let mut columns = vec![self.columns[0].clone()];
        columns.extend(self.rows.iter().map(|r| r[0].render()));
        let rows = (1..self.columns.len())
            .map(|j| {
                let mut row = vec![Cell::Text(self.columns[j].clone())];
                row.extend(self.rows.iter().map(|r| r[j].clone()));
                row
            })
            .collect();
        Some(Table {
            title: self.title.clone(),
            columns,
            rows,
            fold_zero_rows: None,
        })
    }

    /// Row indices of each run to fold (two or more consecutive rows, zero
    /// in every fold column), as (first, last).
    fn zero_runs(&self) -> Vec<(usize, usize)> {
        let Some(f) = &self.fold_zero_rows else {
            return Vec::new();
        };
        let zero = |r: &[Cell]| {
            f.columns
                .iter()
                .all(|&c| r.get(c).is_some_and(Cell::is_zero))
        };
        let mut runs = Vec::new();
        let mut i = 0;
        while i < self.rows.len() {
            let mut j = i;
            while j < self.rows.len() && zero(&self.rows[j]) {
                j += 1;
            }
            if j >= i + 2 {
                runs.push((i, j - 1));
            }
            i = j.max(i + 1);
        }
        runs
    }

    fn aligned(&self) -> String {
        let runs = self.zero_runs();
        let folded = |i: usize| runs.iter().any(|&(a, b)| (a..=b).contains(&i));
        let rendered: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(Cell::render).collect())
            .collect();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for (_, r) in rendered.iter().enumerate().filter(|(i, _)| !folded(*i)) {
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
        for (i, r) in rendered.iter().enumerate() {
            match runs.iter().find(|&&(a, _)| a == i) {
                Some(&(a, b)) => {
                    let label = self
                        .fold_zero_rows
                        .as_ref()
                        .map_or("", |f| f.label.as_str());
                    out.push_str(&format!(
                        "{}s {}-{}: {label}\n",
                        self.columns[0], rendered[a][0], rendered[b][0]
                    ));
                }
                None if folded(i) => {}
                None => line(r, &mut out),
            }
        }
        out
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

    /// A table wider than TEXT_WIDTH whose transposition fits prints
    /// transposed: one line per column, one column per row.
    #[test]
    fn wide_tables_print_transposed() {
        let cols: Vec<String> = (0..20).map(|i| format!("metric_{i:02}")).collect();
        let mut names = vec!["variant"];
        names.extend(cols.iter().map(String::as_str));
        let mut t = Table::new("variants", &names);
        for v in ["lru", "fifo"] {
            let mut row = vec![Cell::Text(v.into())];
            row.extend((0..20u64).map(Cell::UInt));
            t.push_row(row).unwrap();
        }
        assert!(t.to_text().unwrap().lines().any(|l| l.len() > TEXT_WIDTH));
        let text = t.to_text_fit().unwrap();
        assert!(text.lines().all(|l| l.len() <= TEXT_WIDTH), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "variants");
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["variant", "lru", "fifo"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["metric_00", "0", "0"]
        );
        assert_eq!(lines.len(), 3 + 20);
        // A narrow table is left as it is.
        let narrow = sample();
        assert_eq!(narrow.to_text_fit().unwrap(), narrow.to_text().unwrap());
    }

    /// Runs of two or more all-zero rows fold into one line; a single zero
    /// row stays.
    #[test]
    fn zero_rows_fold() {
        let mut t = Table::new("q", &["queue", "commands", "ms"]);
        for (q, c) in [(0u64, 5u64), (1, 0), (2, 3), (3, 0), (4, 0), (5, 0)] {
            t.push_row(vec![Cell::UInt(q), Cell::UInt(c), Cell::float(c as f64, 1)])
                .unwrap();
        }
        t.fold_zero_rows = Some(ZeroFold {
            columns: vec![1, 2],
            label: "no I/O".into(),
        });
        let text = t.to_text().unwrap();
        let lines: Vec<&str> = text.lines().skip(3).collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("    1"), "{text}");
        assert_eq!(lines[3], "queues 3-5: no I/O", "{text}");
    }
}
