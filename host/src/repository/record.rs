//! Strict reading of JSON records: a record is an object holding exactly its declared fields,
//! each of the declared type. Errors name the field by its path (`edits[2].prior`).

use std::collections::BTreeMap;

use crate::canonical::{DIGEST_RULE, Digest, Value};
use crate::git_object::{OBJECT_ID_RULE, ObjectId};

pub use crate::canonical::{FieldError, FieldErrorKind};

/// The fields of one record, checked to be exactly the declared set.
pub struct Fields<'a> {
    path: String,
    map: &'a BTreeMap<String, Value>,
}

impl<'a> Fields<'a> {
    /// Reads `value` as an object whose keys are exactly `declared`.
    pub fn exact(value: &'a Value, path: &str, declared: &[&str]) -> Result<Self, FieldError> {
        Self::with_optional(value, path, declared, &[])
    }

    /// Reads `value` as an object with every key of `declared`, any of `optional`, and no
    /// other.
    pub fn with_optional(
        value: &'a Value,
        path: &str,
        declared: &[&str],
        optional: &[&str],
    ) -> Result<Self, FieldError> {
        let Value::Object(map) = value else {
            return Err(FieldError::wrong(
                path,
                format!("must be an object, not {}", value.type_name()),
            ));
        };
        for key in map.keys() {
            if !declared.contains(&key.as_str()) && !optional.contains(&key.as_str()) {
                return Err(FieldError {
                    kind: FieldErrorKind::Unknown,
                    field: join(path, key),
                    rule: format!(
                        "is not a field of this record (declared: {})",
                        declared
                            .iter()
                            .chain(optional)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        for key in declared {
            if !map.contains_key(*key) {
                return Err(FieldError {
                    kind: FieldErrorKind::Missing,
                    field: join(path, key),
                    rule: "is required".into(),
                });
            }
        }
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    pub fn path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The value of an optional key, if present.
    pub fn optional(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    pub fn value(&self, key: &str) -> &'a Value {
        // `exact` checked that every declared key is present.
        &self.map[key]
    }

    pub fn string(&self, key: &str) -> Result<&'a str, FieldError> {
        match self.value(key) {
            Value::String(text) => Ok(text),
            other => Err(FieldError::wrong(
                &self.path(key),
                format!("must be a string, not {}", other.type_name()),
            )),
        }
    }

    pub fn nullable_string(&self, key: &str) -> Result<Option<&'a str>, FieldError> {
        match self.value(key) {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text)),
            other => Err(FieldError::wrong(
                &self.path(key),
                format!("must be a string or null, not {}", other.type_name()),
            )),
        }
    }

    pub fn integer(&self, key: &str) -> Result<i64, FieldError> {
        match self.value(key) {
            Value::Integer(number) => Ok(*number),
            other => Err(FieldError::wrong(
                &self.path(key),
                format!("must be an integer, not {}", other.type_name()),
            )),
        }
    }

    /// A positive safe integer.
    pub fn positive(&self, key: &str) -> Result<u64, FieldError> {
        let number = self.integer(key)?;
        if number < 1 {
            return Err(FieldError::wrong(
                &self.path(key),
                "must be a positive integer",
            ));
        }
        Ok(number as u64)
    }

    /// A non-negative safe integer.
    pub fn natural(&self, key: &str) -> Result<u64, FieldError> {
        let number = self.integer(key)?;
        if number < 0 {
            return Err(FieldError::wrong(
                &self.path(key),
                "must be a non-negative integer",
            ));
        }
        Ok(number as u64)
    }

    pub fn array(&self, key: &str) -> Result<&'a [Value], FieldError> {
        match self.value(key) {
            Value::Array(items) => Ok(items),
            other => Err(FieldError::wrong(
                &self.path(key),
                format!("must be an array, not {}", other.type_name()),
            )),
        }
    }

    pub fn digest(&self, key: &str) -> Result<Digest, FieldError> {
        parse_digest(self.string(key)?, &self.path(key))
    }

    pub fn nullable_digest(&self, key: &str) -> Result<Option<Digest>, FieldError> {
        self.nullable_string(key)?
            .map(|text| parse_digest(text, &self.path(key)))
            .transpose()
    }

    pub fn object_id(&self, key: &str) -> Result<ObjectId, FieldError> {
        let text = self.string(key)?;
        ObjectId::parse_hex(text).ok_or_else(|| FieldError::wrong(&self.path(key), OBJECT_ID_RULE))
    }

    pub fn literal(&self, key: &str, expected: &str) -> Result<(), FieldError> {
        if self.string(key)? != expected {
            return Err(FieldError::wrong(
                &self.path(key),
                format!("must be {expected:?}"),
            ));
        }
        Ok(())
    }
}

pub(crate) fn parse_digest(text: &str, field: &str) -> Result<Digest, FieldError> {
    Digest::parse(text).ok_or_else(|| FieldError::wrong(field, DIGEST_RULE))
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub use sf_contracts::grammar::{ID_RULE, is_valid_id};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::parse;

    #[test]
    fn exact_fields() {
        let value = parse(br#"{"a":"x","b":1}"#).unwrap();
        let fields = Fields::exact(&value, "r", &["a", "b"]).unwrap();
        assert_eq!(fields.string("a").unwrap(), "x");
        assert_eq!(fields.positive("b").unwrap(), 1);
        assert_eq!(
            fields.string("b").unwrap_err().kind,
            FieldErrorKind::WrongType
        );
        let unknown = Fields::exact(&value, "r", &["a"]).err().unwrap();
        assert_eq!(
            (unknown.kind, unknown.field.as_str()),
            (FieldErrorKind::Unknown, "r.b")
        );
        let missing = Fields::exact(&value, "r", &["a", "b", "c"]).err().unwrap();
        assert_eq!(
            (missing.kind, missing.field.as_str()),
            (FieldErrorKind::Missing, "r.c")
        );
    }
}
