//! Field rules for derived record types, used as `#[serde(deserialize_with = "…")]`: a
//! nullable field that must still be present, an optional one that is never null, positive
//! integers, a value checked by a rule
//! as it is read (so the error names the field), and the variant tag of a record whose shape
//! depends on one of its fields.

use std::fmt::Display;

use serde::de::{self, Deserialize, Deserializer};

use super::de::FieldError;
use super::{MAX_SAFE_INTEGER, Value};

/// A field that is present and may be null: `#[serde(deserialize_with =
/// "canonical::nullable")]` on an `Option`. (Without it, serde reads an absent `Option` field
/// as `None`; sf's records list every field, null or not.)
pub fn nullable<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::deserialize(deserializer)
}

/// A field that may be absent and is never null: `#[serde(default, deserialize_with =
/// "canonical::optional")]` on an `Option` reads an absent field as `None` and a present one
/// as a `T` (null is refused as the wrong type).
pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A positive safe integer: 1 to 2^53 − 1.
pub fn positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let number = u64::deserialize(deserializer)?;
    if number == 0 || number > MAX_SAFE_INTEGER as u64 {
        return Err(de::Error::custom("must be a positive integer"));
    }
    Ok(number)
}

/// Reads a `T` and checks it with `rule`, whose error is the rule broken: a field reader is
/// then one line, `checked(deserializer, |id: &String| …)`.
pub fn checked<'de, D, T, R>(
    deserializer: D,
    rule: impl FnOnce(&T) -> Result<(), R>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
    R: Display,
{
    let value = T::deserialize(deserializer)?;
    rule(&value).map_err(de::Error::custom)?;
    Ok(value)
}

/// Reads a `T` that `is_valid` accepts; one it refuses breaks `rule`.
pub fn valid_if<'de, D, T>(
    deserializer: D,
    is_valid: impl FnOnce(&T) -> bool,
    rule: &'static str,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    checked(deserializer, |value| {
        if is_valid(value) { Ok(()) } else { Err(rule) }
    })
}

/// The variant of a record whose shape depends on one of its string fields (`kind` of an
/// acceptance check, `protocol` of a manifest version): the field `tag` of `value`, found at
/// `path`, which must be one of `variants`. The caller then reads `value` as that variant's
/// type with [`from_value`](super::from_value) at the same path.
pub fn variant_tag<'a>(
    value: &'a Value,
    path: &str,
    tag: &str,
    variants: &[&str],
) -> Result<&'a str, FieldError> {
    let Value::Object(entries) = value else {
        return Err(FieldError::wrong(
            path,
            format!("must be an object, not {}", value.type_name()),
        ));
    };
    let field = if path.is_empty() {
        tag.to_owned()
    } else {
        format!("{path}.{tag}")
    };
    match entries.get(tag) {
        Some(Value::String(name)) if variants.contains(&name.as_str()) => Ok(name),
        None => Err(FieldError {
            kind: super::FieldErrorKind::Missing,
            field,
            rule: "is required".into(),
        }),
        Some(_) => {
            let quoted: Vec<String> = variants.iter().map(|name| format!("{name:?}")).collect();
            let quoted: Vec<&str> = quoted.iter().map(String::as_str).collect();
            Err(FieldError::wrong(
                &field,
                format!("must be {}", super::de::one_of(&quoted)),
            ))
        }
    }
}
