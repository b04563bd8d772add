//! A small ordered JSON tree printed in fio's layout: two-space indent,
//! `"key" : value`, floats as C `%f` (six decimals). Member order is the
//! insertion order, so output is byte-stable.

/// A JSON value with insertion-ordered objects.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum JVal {
    Null,
    Bool(bool),
    Int(i128),
    /// Printed like C `%f` (six decimals), as fio's `json_object_add_value_float`.
    Float(f64),
    /// Printed with the given number of decimals.
    Fixed(f64, u8),
    Str(String),
    Obj(Vec<(String, JVal)>),
    Arr(Vec<JVal>),
}

impl JVal {
    pub(crate) fn obj() -> JVal {
        JVal::Obj(Vec::new())
    }

    /// Appends a member to an object (no-op assertion for other kinds).
    pub(crate) fn add(&mut self, key: impl Into<String>, v: JVal) {
        match self {
            JVal::Obj(m) => m.push((key.into(), v)),
            _ => debug_assert!(false, "JVal::add on a non-object"),
        }
    }

    pub(crate) fn int(v: impl Into<i128>) -> JVal {
        JVal::Int(v.into())
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    fn write(&self, out: &mut String, level: usize) {
        match self {
            JVal::Null => out.push_str("null"),
            JVal::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JVal::Int(v) => out.push_str(&v.to_string()),
            JVal::Float(v) => write_float(out, *v, 6),
            JVal::Fixed(v, d) => write_float(out, *v, *d),
            JVal::Str(s) => write_str(out, s),
            JVal::Obj(m) => {
                if m.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push_str("{\n");
                for (i, (k, v)) in m.iter().enumerate() {
                    indent(out, level + 1);
                    write_str(out, k);
                    out.push_str(" : ");
                    v.write(out, level + 1);
                    if i + 1 < m.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                indent(out, level);
                out.push('}');
            }
            JVal::Arr(a) => {
                if a.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push_str("[\n");
                for (i, v) in a.iter().enumerate() {
                    indent(out, level + 1);
                    v.write(out, level + 1);
                    if i + 1 < a.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                indent(out, level);
                out.push(']');
            }
        }
    }
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_float(out: &mut String, v: f64, decimals: u8) {
    if v.is_finite() {
        let s = format!("{:.*}", usize::from(decimals), v);
        out.push_str(&s);
    } else {
        // JSON has no NaN/Infinity; fio would print "nan", which no parser reads.
        out.push_str("null");
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_layout() {
        let mut o = JVal::obj();
        o.add("fio version", JVal::Str("x".into()));
        o.add("iops", JVal::Float(9351.5981741));
        let mut inner = JVal::obj();
        inner.add("a", JVal::int(1));
        o.add("jobs", JVal::Arr(vec![inner]));
        o.add("s", JVal::Str("q\"\n".into()));
        o.add("bad", JVal::Float(f64::NAN));
        let s = o.render();
        assert_eq!(
            s,
            "{\n  \"fio version\" : \"x\",\n  \"iops\" : 9351.598174,\n  \"jobs\" : [\n    {\n      \"a\" : 1\n    }\n  ],\n  \"s\" : \"q\\\"\\n\",\n  \"bad\" : null\n}"
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["s"], "q\"\n");
    }
}
