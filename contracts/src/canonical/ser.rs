//! Writing: any `Serialize` type as a canonical [`Value`], and from there as canonical bytes.
//!
//! A struct or map becomes an object (its keys sorted by the [`Value`] itself), a sequence or
//! tuple an array, `None` and `()` null, a unit variant its name as a string, and a newtype or
//! struct variant an object of one key, the variant's name. What canonical JSON cannot hold is
//! refused: fractions (`f32`, `f64`), raw bytes, object keys that are not strings, and a key
//! written twice. An integer outside ±(2^53 − 1) is kept as it is (saturated at the bounds of
//! `i64`) so that [`encode`](super::encode) refuses it, naming it.

use std::collections::BTreeMap;

use serde::ser::{self, Impossible, Serialize};

use super::{Digest, JsonError, Value, encode};

/// `value` as a canonical JSON value.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, JsonError> {
    value.serialize(ValueSerializer)
}

/// The canonical bytes of `value`: exactly what [`encode`] gives for [`to_value`]'s value.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, JsonError> {
    encode(&to_value(value)?)
}

/// [`to_canonical_bytes`] for a record with its own bound of `limit` bytes.
pub fn to_canonical_bytes_within<T: Serialize + ?Sized>(
    value: &T,
    limit: usize,
) -> Result<Vec<u8>, JsonError> {
    super::encode_within(&to_value(value)?, limit)
}

/// The `sha256:` digest of `value`'s canonical bytes.
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> Result<Digest, JsonError> {
    Ok(Digest::of(&to_canonical_bytes(value)?))
}

impl ser::Error for JsonError {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        Self::Unencodable {
            what: message.to_string(),
        }
    }
}

fn unencodable(what: &str) -> JsonError {
    JsonError::Unencodable { what: what.into() }
}

/// An integer as a value; beyond the range of `i64` it saturates, which is still outside the
/// safe range, so that encoding refuses it.
fn integer(number: i128) -> Value {
    Value::Integer(number.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// Integers of every width that fits `i128` become [`integer`]s.
macro_rules! integers {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(
            fn $method(self, number: $ty) -> Result<Value, JsonError> {
                Ok(integer(number.into()))
            }
        )*
    };
}

/// The serializer whose output is a [`Value`].
struct ValueSerializer;

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = JsonError;
    type SerializeSeq = Items;
    type SerializeTuple = Items;
    type SerializeTupleStruct = Items;
    type SerializeTupleVariant = Variant<Items>;
    type SerializeMap = Entries;
    type SerializeStruct = Entries;
    type SerializeStructVariant = Variant<Entries>;

    fn serialize_bool(self, flag: bool) -> Result<Value, JsonError> {
        Ok(Value::Bool(flag))
    }

    integers! {
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64,
    }

    fn serialize_u128(self, number: u128) -> Result<Value, JsonError> {
        Ok(integer(i128::try_from(number).unwrap_or(i128::MAX)))
    }

    fn serialize_f32(self, _: f32) -> Result<Value, JsonError> {
        Err(unencodable(
            "a fraction (canonical JSON holds integers only)",
        ))
    }

    fn serialize_f64(self, _: f64) -> Result<Value, JsonError> {
        Err(unencodable(
            "a fraction (canonical JSON holds integers only)",
        ))
    }

    fn serialize_char(self, ch: char) -> Result<Value, JsonError> {
        Ok(Value::String(ch.to_string()))
    }

    fn serialize_str(self, text: &str) -> Result<Value, JsonError> {
        Ok(Value::String(text.to_owned()))
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<Value, JsonError> {
        Err(unencodable("raw bytes (canonical JSON holds text only)"))
    }

    fn serialize_none(self) -> Result<Value, JsonError> {
        Ok(Value::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, JsonError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<Value, JsonError> {
        Ok(Value::Null)
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<Value, JsonError> {
        Ok(Value::Null)
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, JsonError> {
        Ok(Value::String(variant.to_owned()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Value, JsonError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, JsonError> {
        let mut map = BTreeMap::new();
        map.insert(variant.to_owned(), value.serialize(self)?);
        Ok(Value::Object(map))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Items, JsonError> {
        Ok(Items(Vec::with_capacity(len.unwrap_or(0))))
    }

    fn serialize_tuple(self, len: usize) -> Result<Items, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Items, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<Items>, JsonError> {
        Ok(Variant {
            name: variant,
            inner: Items(Vec::with_capacity(len)),
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Entries, JsonError> {
        Ok(Entries::default())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Entries, JsonError> {
        Ok(Entries::default())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Entries>, JsonError> {
        Ok(Variant {
            name: variant,
            inner: Entries::default(),
        })
    }
}

/// The items of an array being written.
struct Items(Vec<Value>);

impl ser::SerializeSeq for Items {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        self.0.push(value.serialize(ValueSerializer)?);
        Ok(())
    }

    fn end(self) -> Result<Value, JsonError> {
        Ok(Value::Array(self.0))
    }
}

impl ser::SerializeTuple for Items {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Value, JsonError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for Items {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Value, JsonError> {
        ser::SerializeSeq::end(self)
    }
}

/// The entries of an object being written; a key written twice is refused.
#[derive(Default)]
struct Entries {
    map: BTreeMap<String, Value>,
    key: Option<String>,
}

impl Entries {
    fn insert(&mut self, key: String, value: Value) -> Result<(), JsonError> {
        if self.map.contains_key(&key) {
            return Err(JsonError::DuplicateKey { key });
        }
        self.map.insert(key, value);
        Ok(())
    }
}

impl ser::SerializeMap for Entries {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), JsonError> {
        self.key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| unencodable("a map value without a key"))?;
        let value = value.serialize(ValueSerializer)?;
        self.insert(key, value)
    }

    fn end(self) -> Result<Value, JsonError> {
        Ok(Value::Object(self.map))
    }
}

impl ser::SerializeStruct for Entries {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        let value = value.serialize(ValueSerializer)?;
        self.insert(key.to_owned(), value)
    }

    fn end(self) -> Result<Value, JsonError> {
        Ok(Value::Object(self.map))
    }
}

/// A tuple or struct variant being written: `{"<variant>": <its items or fields>}`.
struct Variant<T> {
    name: &'static str,
    inner: T,
}

impl<T> Variant<T> {
    fn wrap(name: &'static str, value: Value) -> Value {
        let mut map = BTreeMap::new();
        map.insert(name.to_owned(), value);
        Value::Object(map)
    }
}

impl ser::SerializeTupleVariant for Variant<Items> {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        ser::SerializeSeq::serialize_element(&mut self.inner, value)
    }

    fn end(self) -> Result<Value, JsonError> {
        let items = ser::SerializeSeq::end(self.inner)?;
        Ok(Self::wrap(self.name, items))
    }
}

impl ser::SerializeStructVariant for Variant<Entries> {
    type Ok = Value;
    type Error = JsonError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        ser::SerializeStruct::serialize_field(&mut self.inner, key, value)
    }

    fn end(self) -> Result<Value, JsonError> {
        let fields = ser::SerializeStruct::end(self.inner)?;
        Ok(Self::wrap(self.name, fields))
    }
}

/// Methods of a `Serializer` that refuse what they are given with `$error`: the simple ones
/// listed (`serialize_bool(bool)`, or `serialize_struct(&'static str, usize) ->
/// SerializeStruct` for one returning a compound), and every compound but a struct, map or
/// plain value. Used by the serializers that accept one shape only.
macro_rules! refuse_serializing {
    (
        $error:expr;
        $($method:ident($($arg:ty),*) $(-> $compound:ident)?),* $(,)?
    ) => {
        $(
            fn $method(self, $(_: $arg),*) -> Result<refuse_serializing!(@ok $($compound)?), Self::Error> {
                Err($error)
            }
        )*

        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Self::Ok, Self::Error> {
            Err($error)
        }

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Self::Error> {
            Err($error)
        }

        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
            Err($error)
        }

        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Self::Error> {
            Err($error)
        }

        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Self::Error> {
            Err($error)
        }

        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Self::Error> {
            Err($error)
        }

        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
            Err($error)
        }

        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Self::Error> {
            Err($error)
        }
    };
    (@ok) => { Self::Ok };
    (@ok $compound:ident) => { Self::$compound };
}
pub(super) use refuse_serializing;

/// Object keys: strings (and what serde writes as one: a char, a unit variant's name).
struct KeySerializer;

fn not_a_key() -> JsonError {
    unencodable("an object key that is not a string")
}

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = JsonError;
    type SerializeSeq = Impossible<String, JsonError>;
    type SerializeTuple = Impossible<String, JsonError>;
    type SerializeTupleStruct = Impossible<String, JsonError>;
    type SerializeTupleVariant = Impossible<String, JsonError>;
    type SerializeMap = Impossible<String, JsonError>;
    type SerializeStruct = Impossible<String, JsonError>;
    type SerializeStructVariant = Impossible<String, JsonError>;

    fn serialize_str(self, text: &str) -> Result<String, JsonError> {
        Ok(text.to_owned())
    }

    fn serialize_char(self, ch: char) -> Result<String, JsonError> {
        Ok(ch.to_string())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, JsonError> {
        Ok(variant.to_owned())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, JsonError> {
        value.serialize(self)
    }

    refuse_serializing! {
        not_a_key();
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_bytes(&[u8]),
        serialize_none(), serialize_unit(), serialize_unit_struct(&'static str),
        serialize_struct(&'static str, usize) -> SerializeStruct,
    }
}

/// A [`Value`] writes itself as the JSON it is, through any serializer.
impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => serializer.serialize_unit(),
            Self::Bool(flag) => serializer.serialize_bool(*flag),
            Self::Integer(number) => serializer.serialize_i64(*number),
            Self::String(text) => serializer.serialize_str(text),
            Self::Array(items) => serializer.collect_seq(items),
            Self::Object(entries) => serializer.collect_map(entries),
        }
    }
}

/// A digest writes itself as its text: `sha256:` and 64 lowercase hex characters.
impl Serialize for Digest {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
