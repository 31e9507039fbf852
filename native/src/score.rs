//! Sort keys from metrics held as JSON text (processor/core/scoring.py, same rules).
//!
//! `lookup` mirrors scoring.lookup: the top-level key first, then the walk down `a/b/c`
//! through objects. When the walk fails, Python falls back to a scan of flattened keys;
//! that rare case is answered by the Python scorer (`Found::Python`).

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use crate::decode::{parse_number, Text};

/// `(has_score, value, report_index)`, ascending, best last; `value` is never NaN.
#[derive(Clone, Copy, Debug)]
pub struct SortKey {
    pub has: bool,
    pub value: f64,
    pub index: u64,
}

impl PartialEq for SortKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for SortKey {}
impl PartialOrd for SortKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for SortKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // -0.0 == 0.0 as in Python; NaN never gets here (it ranks as "no score")
        let value = self.value.partial_cmp(&other.value).unwrap_or(Ordering::Equal);
        self.has.cmp(&other.has).then(value).then(self.index.cmp(&other.index))
    }
}

pub enum Found<'a> {
    Value(&'a str),
    Missing,
    Python,
}

/// (has, signed value), or None when the Python scorer must decide.
pub fn score_raw(metrics: &str, attribute: &str, order_max: bool) -> Option<(bool, f64)> {
    match lookup(metrics, attribute) {
        Found::Python => None,
        Found::Missing => Some((false, f64::NEG_INFINITY)),
        Found::Value(v) => {
            let text = v.as_bytes();
            match text.first() {
                Some(b'-' | b'0'..=b'9') => {
                    let value = parse_number(text)?;
                    Some((true, if order_max { value } else { -value }))
                }
                _ => Some((false, f64::NEG_INFINITY)), // bool, string, list, null: not numeric
            }
        }
    }
}

fn is_object(v: &str) -> bool {
    v.starts_with('{')
}

/// `metrics` is the text of a JSON object already validated by the decoder.
fn lookup<'a>(metrics: &'a str, attribute: &str) -> Found<'a> {
    let mut parts = attribute.split('/');
    let head = if attribute.contains('/') { parts.next() } else { None };
    // one pass over the top level finds both `attribute` and the first step of the walk
    let Some([top, mut node]) = members(metrics, [Some(attribute), head]) else { return Found::Python };
    match top {
        Some(v) if !is_object(v) => return Found::Value(v),
        _ if head.is_none() => return Found::Missing,
        _ => {}
    }
    for part in parts {
        match node {
            Some(v) if is_object(v) => match members(v, [Some(part), None]) {
                Some([found, _]) => node = found,
                None => return Found::Python,
            },
            _ => return Found::Python, // Python: KeyError or TypeError, then the flattened-key scan
        }
    }
    match node {
        None => Found::Python,
        Some(v) if is_object(v) => Found::Missing,
        Some(v) => Found::Value(v),
    }
}

/// The values of the *last* members named `names` (a Python dict keeps the last duplicate);
/// None when the text cannot be read as an object here.
fn members<'a>(object: &'a str, names: [Option<&str>; 2]) -> Option<[Option<&'a str>; 2]> {
    let mut de = serde_json::Deserializer::from_str(object);
    Member { names }.deserialize(&mut de).ok()
}

/// `{**old, **new}` of two metrics objects as JSON text: a member keeps its first place and
/// takes its last value, as in a Python dict. None when a name has an escape (then the
/// spelling of equal names may differ, and Python merges).
pub fn merge(old: &str, new: &str) -> Option<String> {
    let mut merged: indexmap::IndexMap<&str, &str> = indexmap::IndexMap::new();
    for text in [old, new] {
        for (Text(name), value) in object_members(text)? {
            let Cow::Borrowed(name) = name else { return None };
            if name.contains('\\') {
                return None;
            }
            merged.insert(name, value.get());
        }
    }
    let mut out = String::with_capacity(old.len() + new.len());
    out.push('{');
    for (i, (name, value)) in merged.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(name);
        out.push_str("\":");
        out.push_str(value);
    }
    out.push('}');
    Some(out)
}

/// Every member of an object, in order, duplicates included; None if `text` is not an object.
pub fn object_members(text: &str) -> Option<Vec<(Text<'_>, &RawValue)>> {
    Members.deserialize(&mut serde_json::Deserializer::from_str(text)).ok()
}

/// Every member of an object, in order, duplicates included.
struct Members;

impl<'de> DeserializeSeed<'de> for Members {
    type Value = Vec<(Text<'de>, &'de RawValue)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(Text<'de>, &'de RawValue)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            members.push((key, map.next_value::<&'de RawValue>()?));
        }
        Ok(members)
    }
}

struct Member<'n> {
    names: [Option<&'n str>; 2],
}

impl<'de> DeserializeSeed<'de> for Member<'_> {
    type Value = [Option<&'de str>; 2];
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = [Option<&'de str>; 2];
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None, None];
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            match self.names.iter().position(|n| *n == Some(&*key)) {
                Some(0) if self.names[1] == Some(&*key) => {
                    let value = map.next_value::<&'de RawValue>()?.get();
                    found = [Some(value), Some(value)];
                }
                Some(i) => found[i] = Some(map.next_value::<&'de RawValue>()?.get()),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}
