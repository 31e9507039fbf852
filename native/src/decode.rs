//! The native decode fast path: a strict *subset* of what events/fastpath.py accepts.
//!
//! A line is taken here only when this code is sure the Python decoder would accept it and
//! read the same values; anything else (`None`) goes to `events.codec.decode_event`, which
//! accepts it or says precisely why not. So this may refuse more than needed, never less:
//! no extension attributes, `time` absent, null or in the common RFC 3339 shape, ASCII-printable run ids, metric
//! integers of at most 15 digits (exact as f64) and finite floats, nesting as in the fast path.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

use crate::support::{Event, Kind, Metrics};

const RUN_ID_MAX: usize = 256;
const MAX_COMPLETED_PATHS: usize = 1000;
/// Containers nested inside a metric value (events/fastpath.py FAST_NESTING), plus metrics' own.
const METRICS_MAX_DEPTH: usize = 8 + 1;
/// Integer literals this long are exact as f64 (< 2**53) and equal to the Python int.
const MAX_INT_DIGITS: usize = 15;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointRef<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportData<'a> {
    #[serde(borrow)]
    metrics: &'a RawValue,
    #[serde(default, borrow)]
    checkpoint: Option<Obj<CheckpointRef<'a>>>,
    #[serde(default)]
    validation: bool,
    #[serde(default)]
    generation: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidationData<'a> {
    #[serde(borrow)]
    checkpoint_path: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "present")]
    metrics: Option<&'a RawValue>, // Some("null") for null: refused, as null is not valid metrics
    #[serde(default, borrow)]
    #[allow(dead_code)] // validated only: the document does not show it
    error: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeletionData<'a> {
    #[serde(borrow)]
    checkpoint_paths: Vec<Cow<'a, str>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The event, or None when the Python decoder must decide.
pub fn decode(raw: &[u8]) -> Option<Event<'_>> {
    let text = std::str::from_utf8(raw).ok()?; // UTF-8 checked once
    let mut de = serde_json::Deserializer::from_str(text);
    let env = de.deserialize_map(EnvelopeVisitor).ok()?;
    de.end().ok()?;
    let subject = &env.subject;
    if subject.is_empty() || subject.len() > RUN_ID_MAX || !subject.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return None;
    }
    let kind = match env.data {
        Data::Report(d) => report(d)?,
        Data::Validation(d) => validation(d)?,
        Data::Deletion(d) => deletion(d)?,
    };
    Some(Event { id: env.id, subject: env.subject, kind })
}

enum Data<'a> {
    Report(ReportData<'a>),
    Validation(ValidationData<'a>),
    Deletion(DeletionData<'a>),
}

struct Envelope<'a> {
    id: Cow<'a, str>,
    subject: Cow<'a, str>,
    data: Data<'a>,
}

/// A struct read only from a JSON object: serde's derived structs also accept an array of
/// the fields in order (`"data": [{...}, null]`), which no Python decoder does.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjVisitor(std::marker::PhantomData))
    }
}

struct ObjVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
    }
}

/// A string, borrowed from the line unless it has escapes.
pub struct Text<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }
}

/// The CloudEvents envelope in one pass: `data` is read by its type as soon as the type is
/// known (it is written first in practice), else kept as raw text and read afterwards.
/// Every refusal is an error: the Python decoder decides those lines.
struct EnvelopeVisitor;

fn refuse<E: de::Error>(why: &str) -> E {
    E::custom(why)
}

fn data_of<'de, A: MapAccess<'de>>(kind: &str, map: &mut A) -> Result<Data<'de>, A::Error> {
    Ok(match kind {
        REPORT => Data::Report(map.next_value::<Obj<_>>()?.0),
        VALIDATION => Data::Validation(map.next_value::<Obj<_>>()?.0),
        DELETION => Data::Deletion(map.next_value::<Obj<_>>()?.0),
        _ => return Err(refuse("not a fast-path type")),
    })
}

fn data_from_raw<'de, E: de::Error>(kind: &str, raw: &'de RawValue) -> Result<Data<'de>, E> {
    let text = raw.get();
    let data = match kind {
        REPORT => serde_json::from_str(text).map(|Obj(d)| Data::Report(d)),
        VALIDATION => serde_json::from_str(text).map(|Obj(d)| Data::Validation(d)),
        DELETION => serde_json::from_str(text).map(|Obj(d)| Data::Deletion(d)),
        _ => return Err(refuse("not a fast-path type")),
    };
    data.map_err(|_| refuse("bad data"))
}

const REPORT: &str = "ckptlog.report.v1";
const VALIDATION: &str = "ckptlog.validation_result.v1";
const DELETION: &str = "ckptlog.deletion_completed.v2";

fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(refuse("duplicate member"));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a CloudEvents envelope")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut source, mut kind, mut subject) = (None, None, None, None);
        let (mut version, mut time, mut content) = (None, None, None);
        let (mut data, mut raw): (Option<Data<'de>>, Option<&'de RawValue>) = (None, None);
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            match name.as_ref() {
                "specversion" => once(&mut version, map.next_value::<Text<'de>>()?.0)?,
                "id" => once(&mut id, map.next_value::<Text<'de>>()?.0)?,
                "source" => once(&mut source, map.next_value::<Text<'de>>()?.0)?,
                "subject" => once(&mut subject, map.next_value::<Text<'de>>()?.0)?,
                "type" => once(&mut kind, map.next_value::<Text<'de>>()?.0)?,
                "time" => once(&mut time, map.next_value::<Option<Text<'de>>>()?.map(|t| t.0))?,
                "datacontenttype" => once(&mut content, map.next_value::<Option<Text<'de>>>()?.map(|t| t.0))?,
                "data" if data.is_some() || raw.is_some() => return Err(refuse("duplicate member")),
                "data" => match &kind {
                    Some(k) => data = Some(data_of(k, &mut map)?),
                    None => raw = Some(map.next_value()?),
                },
                _ => return Err(refuse("an extension attribute")),
            }
        }
        let (Some(id), Some(source), Some(kind), Some(subject)) = (id, source, kind, subject) else {
            return Err(refuse("a missing member"));
        };
        let content_ok = matches!(content, None | Some(None)) || content == Some(Some(Cow::Borrowed("application/json")));
        let time_ok = match &time {
            Some(Some(t)) => crate::rfc3339::time_ok(t),
            _ => true,
        };
        if version.as_deref() != Some("1.0") || id.is_empty() || source.is_empty() || !time_ok || !content_ok {
            return Err(refuse("an envelope value the fast path does not vouch for"));
        }
        let data = match (data, raw) {
            (Some(data), _) => data,
            (None, Some(raw)) => data_from_raw(&kind, raw)?,
            (None, None) => return Err(refuse("no data")),
        };
        Ok(Envelope { id, subject, data })
    }
}

/// Metrics stay JSON text (`Metrics::Raw`): only kept checkpoints' are ever read into Python.
fn report(d: ReportData<'_>) -> Option<Kind<'_>> {
    let metrics = checked_metrics(d.metrics)?;
    let path = match d.checkpoint {
        Some(Obj(c)) if c.path.is_empty() => return None,
        Some(Obj(c)) => Some(c.path),
        None => None,
    };
    Some(Kind::Report { generation: d.generation, path, metrics: Metrics::Raw(metrics.into()), pending: d.validation })
}

fn validation(d: ValidationData<'_>) -> Option<Kind<'_>> {
    if d.checkpoint_path.is_empty() || !matches!(d.status.as_ref(), "VALIDATED" | "VALIDATION_FAILED" | "VALIDATION_TIMEOUT") {
        return None;
    }
    let metrics = match d.metrics {
        Some(m) => Some(Metrics::Raw(checked_metrics(m)?.into())), // null is refused there (not an object)
        None => None,
    };
    Some(Kind::Validation { path: d.checkpoint_path, status: d.status, metrics })
}

fn deletion(d: DeletionData<'_>) -> Option<Kind<'_>> {
    let n = d.checkpoint_paths.len();
    if n == 0 || n > MAX_COMPLETED_PATHS || d.checkpoint_paths.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(Kind::Deletion { paths: d.checkpoint_paths })
}

/// The metrics text when it is an object this path vouches for (see the module doc).
fn checked_metrics(metrics: &RawValue) -> Option<&str> {
    let text = metrics.get();
    if !text.starts_with('{') || !scan(text.as_bytes()) {
        return None;
    }
    Some(text)
}

/// One pass over syntactically valid JSON: nesting within bounds, integers short enough to be
/// exact, floats finite, and no `\u` escape of a surrogate (which Python may read differently).
fn scan(text: &[u8]) -> bool {
    let (mut depth, mut i, n) = (0usize, 0usize, text.len());
    while i < n {
        match text[i] {
            b'{' | b'[' => {
                depth += 1;
                if depth > METRICS_MAX_DEPTH {
                    return false;
                }
            }
            b'}' | b']' => depth -= 1,
            b'"' => match skip_string(text, i + 1) {
                Some(end) => i = end,
                None => return false,
            },
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i + 1 < n && matches!(text[i + 1], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    i += 1;
                }
                if !number_ok(&text[start..=i]) {
                    return false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Index of the closing quote of a string starting at `i`; None for a surrogate escape.
fn skip_string(text: &[u8], mut i: usize) -> Option<usize> {
    while i < text.len() {
        match text[i] {
            b'"' => return Some(i),
            b'\\' => {
                if text.get(i + 1) == Some(&b'u') {
                    let hex = text.get(i + 2..i + 6)?;
                    if matches!(hex[0], b'd' | b'D') && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F') {
                        return None;
                    }
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    None
}

fn number_ok(token: &[u8]) -> bool {
    if token.iter().any(|b| matches!(b, b'e' | b'E')) {
        return parse_number(token).is_some_and(f64::is_finite); // 1e400 would be inf
    }
    let whole = token.iter().take_while(|b| **b != b'.').filter(|b| b.is_ascii_digit()).count();
    if token.contains(&b'.') {
        return whole <= 300; // below 1e300 without an exponent: finite, no need to parse
    }
    whole <= MAX_INT_DIGITS && token != b"-0" // serde_json reads -0 as the float -0.0, Python as the int 0
}

pub fn parse_number(token: &[u8]) -> Option<f64> {
    std::str::from_utf8(token).ok()?.parse::<f64>().ok()
}
