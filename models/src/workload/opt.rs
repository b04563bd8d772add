//! What job options are made of, shared by the option parsers ([`super::job`]
//! and [`super::job_ext`]): a value as written ([`OptValue`]) and fio's CPU
//! lists ([`parse_cpu_list`]).

use serde::{Deserialize, Deserializer};

/// A scalar option value as written (TOML value or fio INI string).
#[derive(Debug, Clone, PartialEq)]
pub enum OptValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl OptValue {
    /// The value as text, trimmed.
    pub fn text_trimmed(&self) -> String {
        self.text().trim().to_string()
    }

    pub(crate) fn text(&self) -> String {
        match self {
            OptValue::Str(s) => s.clone(),
            OptValue::Int(i) => i.to_string(),
            OptValue::Float(f) => f.to_string(),
            OptValue::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
        }
    }
}

impl serde::Serialize for OptValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OptValue::Str(v) => s.serialize_str(v),
            OptValue::Int(v) => s.serialize_i64(*v),
            OptValue::Float(v) => s.serialize_f64(*v),
            OptValue::Bool(v) => s.serialize_bool(*v),
        }
    }
}

impl<'de> Deserialize<'de> for OptValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Int(i64),
            Float(f64),
            Str(String),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Bool(b) => OptValue::Bool(b),
            Raw::Int(i) => OptValue::Int(i),
            Raw::Float(f) => OptValue::Float(f),
            Raw::Str(s) => OptValue::Str(s),
        })
    }
}

/// Parses fio's `cpus_allowed` list: "0-5,12,14-15".
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().ok()?;
            let b: u32 = b.trim().parse().ok()?;
            if a > b || b - a > 4096 {
                return None;
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().ok()?);
        }
        if out.len() > 4096 {
            return None;
        }
    }
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}
