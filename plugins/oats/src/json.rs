//! Strict JSON for documents that come from capabilities and their authors: UTF-8 only,
//! duplicate keys refused, bounded size, depth and entry count, and nothing after the
//! document but white space. Values are `serde_json::Value`, so fractions are kept (a
//! setting default may be `0.5`); sf's own records use `sf_contracts::canonical` instead.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{ErrorCode, OatsError};

/// The bounds of one parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes.
    pub bytes: usize,
    /// The deepest nesting of arrays and objects.
    pub depth: usize,
    /// The most values in all (every array item and object entry counts one).
    pub entries: usize,
}

/// Why bytes are not acceptable JSON. `code` is [`ErrorCode::InvalidJson`],
/// [`ErrorCode::DuplicateKey`] or [`ErrorCode::TooLarge`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonProblem {
    /// Which rejection it is.
    pub code: ErrorCode,
    /// What is wrong, in words (with the offending key or the bound).
    pub message: String,
}

impl JsonProblem {
    /// As an [`OatsError`] about `subject`.
    pub fn into_error(self, subject: impl Into<String>) -> OatsError {
        OatsError::new(self.code, subject, self.message)
    }
}

impl fmt::Display for JsonProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Parses `bytes` as one strict JSON document within `limits`.
pub fn parse(bytes: &[u8], limits: Limits) -> Result<Value, JsonProblem> {
    if bytes.len() > limits.bytes {
        return Err(JsonProblem {
            code: ErrorCode::TooLarge,
            message: format!(
                "the document is {} bytes; the bound is {}",
                bytes.len(),
                limits.bytes
            ),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|error| JsonProblem {
        code: ErrorCode::InvalidJson,
        message: format!("not valid UTF-8: {error}"),
    })?;
    let state = std::cell::Cell::new(0usize);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let seed = Strict {
        depth: 0,
        limits,
        entries: &state,
    };
    let value = seed.deserialize(&mut deserializer).map_err(classify)?;
    deserializer.end().map_err(classify)?;
    Ok(value)
}

const DUPLICATE: &str = "sf-duplicate-key:";
const DEEP: &str = "sf-too-deep";
const WIDE: &str = "sf-too-many-entries";

fn classify(error: serde_json::Error) -> JsonProblem {
    let text = error.to_string();
    if let Some(rest) = text.strip_prefix(DUPLICATE) {
        let key = rest.split(" at line ").next().unwrap_or(rest);
        return JsonProblem {
            code: ErrorCode::DuplicateKey,
            message: format!("duplicate key {key}"),
        };
    }
    if text.starts_with(DEEP) {
        return JsonProblem {
            code: ErrorCode::InvalidJson,
            message: "the document nests too deeply".into(),
        };
    }
    if text.starts_with(WIDE) {
        return JsonProblem {
            code: ErrorCode::TooLarge,
            message: "the document holds too many entries".into(),
        };
    }
    JsonProblem {
        code: ErrorCode::InvalidJson,
        message: text,
    }
}

#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    limits: Limits,
    entries: &'a std::cell::Cell<usize>,
}

impl<'a> Strict<'a> {
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let next = self.entries.get() + 1;
        if next > self.limits.entries {
            return Err(E::custom(WIDE));
        }
        self.entries.set(next);
        Ok(())
    }

    fn nested<E: de::Error>(&self) -> Result<Strict<'a>, E> {
        if self.depth + 1 > self.limits.depth {
            return Err(E::custom(DEEP));
        }
        Ok(Strict {
            depth: self.depth + 1,
            ..*self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            self.count()?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut entries = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE}{key:?}")));
            }
            let value = map.next_value_seed(inner)?;
            self.count()?;
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

/// The JSON type name of `value`, for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        bytes: 1024,
        depth: 4,
        entries: 16,
    };

    #[test]
    fn strict_parse() {
        assert_eq!(
            parse(br#" {"a":[1,2.5,"x",null,true]} "#, LIMITS).unwrap(),
            serde_json::json!({"a":[1,2.5,"x",null,true]})
        );
        let cases: &[(&[u8], ErrorCode)] = &[
            (br#"{"a":1,"a":2}"#, ErrorCode::DuplicateKey),
            (br#"{"b":{"a":1,"a":2}}"#, ErrorCode::DuplicateKey),
            (b"{} {}", ErrorCode::InvalidJson),
            (b"\"\xff\"", ErrorCode::InvalidJson),
            (b"[[[[[1]]]]]", ErrorCode::InvalidJson),
            (b"[1,]", ErrorCode::InvalidJson),
            (b"", ErrorCode::InvalidJson),
            (&[b' '; 1025], ErrorCode::TooLarge),
            (
                b"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]",
                ErrorCode::TooLarge,
            ),
        ];
        for (bytes, code) in cases {
            assert_eq!(
                parse(bytes, LIMITS).unwrap_err().code,
                *code,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let duplicate = parse(br#"{"key":1,"key":2}"#, LIMITS).unwrap_err();
        assert!(duplicate.message.contains("\"key\""), "{duplicate}");
    }
}
