//! The serde codec: what it writes is exactly what `encode` writes, and what it refuses it
//! refuses with the field's path and the rejection's kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;
use crate::git_object::ObjectId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Colour {
    Red,
    DeepBlue,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Item {
    name: String,
    #[serde(deserialize_with = "nullable")]
    prior: Option<Digest>,
    colour: Colour,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
struct Record {
    // Declared out of order: the encoding sorts keys anyway.
    zeta: u64,
    #[serde(deserialize_with = "positive")]
    revision: u64,
    commit: ObjectId,
    items: Vec<Item>,
    labels: BTreeMap<String, i64>,
    #[serde(deserialize_with = "nullable")]
    note: Option<String>,
    free: Value,
    flag: bool,
}
crate::literal_fields!(Record { "protocol": "sf-test/1", "objectFormat": "sha1" });

fn record() -> Record {
    Record {
        zeta: 7,
        revision: 3,
        commit: ObjectId::from_bytes([0xab; 20]),
        items: vec![
            Item {
                name: "a\"b\\c\n\u{1}é😀".into(),
                prior: Some(Digest::of(b"x")),
                colour: Colour::DeepBlue,
            },
            Item {
                name: "second".into(),
                prior: None,
                colour: Colour::Red,
            },
        ],
        labels: [
            ("é".to_owned(), -4),
            ("z".to_owned(), 9),
            ("A".to_owned(), 0),
        ]
        .into_iter()
        .collect(),
        note: None,
        free: object([("k", Value::Array(vec![Value::Null, Value::Bool(false)]))]),
        flag: true,
    }
}

/// The record written with the hand-built value, for comparison.
fn hand_built(record: &Record) -> Value {
    let items = record
        .items
        .iter()
        .map(|item| {
            object([
                ("name", item.name.as_str().into()),
                ("prior", item.prior.as_ref().map(ToString::to_string).into()),
                (
                    "colour",
                    match item.colour {
                        Colour::Red => "red",
                        Colour::DeepBlue => "deep-blue",
                    }
                    .into(),
                ),
            ])
        })
        .collect();
    object([
        ("protocol", "sf-test/1".into()),
        ("objectFormat", "sha1".into()),
        ("zeta", Value::Integer(record.zeta as i64)),
        ("revision", Value::Integer(record.revision as i64)),
        ("commit", record.commit.to_hex().into()),
        ("items", Value::Array(items)),
        (
            "labels",
            Value::Object(
                record
                    .labels
                    .iter()
                    .map(|(key, value)| (key.clone(), Value::Integer(*value)))
                    .collect(),
            ),
        ),
        ("note", record.note.clone().into()),
        ("free", record.free.clone()),
        ("flag", Value::Bool(record.flag)),
    ])
}

#[test]
fn writes_exactly_what_encode_writes_and_reads_it_back() {
    let record = record();
    let bytes = to_canonical_bytes(&record).unwrap();
    assert_eq!(bytes, encode(&hand_built(&record)).unwrap());
    assert_eq!(to_value(&record).unwrap(), hand_built(&record));
    assert_eq!(digest_of(&record).unwrap(), Digest::of(&bytes));
    let back: Record = from_canonical_slice(&bytes, "record").unwrap();
    assert_eq!(back, record);
    // Any white space and key order read the same record.
    let text = String::from_utf8(bytes.clone()).unwrap();
    let spaced = text.replace(",\"", " ,\n\t\"").replace("\":", "\" : ");
    assert_eq!(
        from_slice::<Record>(spaced.as_bytes(), "record").unwrap(),
        record
    );
    assert_eq!(
        from_canonical_slice::<Record>(spaced.as_bytes(), "record")
            .unwrap_err()
            .kind,
        FieldErrorKind::NotCanonical
    );
    // The same type through another format carries its literal fields too.
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(json["protocol"], "sf-test/1");
    assert_eq!(json["objectFormat"], "sha1");
    assert_eq!(serde_json::from_value::<Record>(json).unwrap(), record);
}

#[test]
fn keys_are_in_utf8_byte_order() {
    let bytes = to_canonical_bytes(&record()).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let order = [
        "\"commit\"",
        "\"flag\"",
        "\"free\"",
        "\"items\"",
        "\"labels\"",
        "\"note\"",
        "\"objectFormat\"",
        "\"protocol\"",
        "\"revision\"",
        "\"zeta\"",
    ];
    let at: Vec<usize> = order.iter().map(|key| text.find(key).unwrap()).collect();
    assert!(at.windows(2).all(|pair| pair[0] < pair[1]), "{text}");
    // "A" < "z" < "é" by bytes (é is 0xc3 0xa9).
    assert!(text.contains(r#""labels":{"A":0,"z":9,"é":-4}"#), "{text}");
    assert!(text.contains(r#"{"colour":"deep-blue","name":"#), "{text}");
}

/// A small deterministic generator (xorshift), so the strings are many and varied without a
/// dependency.
fn strings() -> Vec<String> {
    let mut all: Vec<String> = (0u32..0x80)
        .filter_map(char::from_u32)
        .map(String::from)
        .collect();
    all.extend(
        [
            "",
            "/",
            "\u{7f}",
            "\u{80}",
            "\u{2028}",
            "\u{2029}",
            "\u{feff}",
            "é",
            "😀",
            "\u{10ffff}",
            "a\"b",
            "\\\\",
            "\\u0000",
        ]
        .map(String::from),
    );
    let alphabet: Vec<char> = (0u32..0x30)
        .chain([0x5c, 0x22, 0x7f, 0xe9, 0x2028, 0xfffd, 0x1f600, 0x10ffff])
        .filter_map(char::from_u32)
        .chain('a'..='e')
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 24) as usize;
        let mut text = String::new();
        let mut pick = state;
        for _ in 0..len {
            pick = pick.rotate_left(11).wrapping_mul(0x2545_f491_4f6c_dd1d);
            text.push(alphabet[(pick % alphabet.len() as u64) as usize]);
        }
        all.push(text);
    }
    all
}

#[test]
fn strings_are_escaped_as_encode_escapes_them() {
    for text in strings() {
        let through_serde = to_canonical_bytes(&text).unwrap();
        assert_eq!(
            through_serde,
            encode(&Value::String(text.clone())).unwrap(),
            "{text:?}"
        );
        // An independent writer agrees: serde_json escapes exactly these characters, the
        // same way.
        assert_eq!(
            through_serde,
            serde_json::to_vec(&text).unwrap(),
            "{text:?}"
        );
        // As a key too.
        let map: BTreeMap<String, u8> = [(text.clone(), 1)].into_iter().collect();
        assert_eq!(
            to_canonical_bytes(&map).unwrap(),
            encode(&Value::Object(
                [(text.clone(), Value::Integer(1))].into_iter().collect()
            ))
            .unwrap()
        );
        assert_eq!(
            from_canonical_slice::<String>(&through_serde, "s").unwrap(),
            text
        );
    }
}

/// Reads `text` as a record and returns (code, field, rule).
fn refusal(text: &str) -> (String, String, String) {
    let error = from_slice::<Record>(text.as_bytes(), "record").unwrap_err();
    (error.code().to_owned(), error.field, error.rule)
}

fn good_text() -> String {
    String::from_utf8(to_canonical_bytes(&record()).unwrap()).unwrap()
}

#[test]
fn every_rejection_names_its_field_and_kind() {
    let good = good_text();
    let digest = Digest::of(b"x").to_string();
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (
            good.replacen("\"zeta\"", "\"extra\":1,\"zeta\"", 1),
            "unknown-field",
            "record.extra",
            "is not a field of this record (declared: zeta, revision, commit, items, labels, note, free, flag)",
        ),
        (
            good.replacen(
                "\"colour\":\"red\",",
                "\"colour\":\"red\",\"verified\":true,",
                1,
            ),
            "unknown-field",
            "record.items[1].verified",
            "is not a field of this record (declared: name, prior, colour)",
        ),
        (
            good.replacen("\"flag\":true,", "", 1),
            "missing-field",
            "record.flag",
            "is required",
        ),
        (
            good.replacen("\"note\":null,", "", 1),
            "missing-field",
            "record.note",
            "is required",
        ),
        (
            good.replacen(",\"prior\":null", "", 1),
            "missing-field",
            "record.items[1].prior",
            "is required",
        ),
        (
            good.replacen("\"protocol\":\"sf-test/1\",", "", 1),
            "missing-field",
            "record.protocol",
            "is required",
        ),
        (
            good.replacen("sf-test/1", "sf-test/2", 1),
            "wrong-type",
            "record.protocol",
            "must be \"sf-test/1\"",
        ),
        (
            good.replacen("\"sha1\"", "1", 1),
            "wrong-type",
            "record.objectFormat",
            "must be a string, not integer",
        ),
        (
            good.replacen("\"zeta\":7", "\"zeta\":-7", 1),
            "wrong-type",
            "record.zeta",
            "must be a non-negative integer",
        ),
        (
            good.replacen("\"zeta\":7", "\"zeta\":\"7\"", 1),
            "wrong-type",
            "record.zeta",
            "must be an integer, not string",
        ),
        (
            good.replacen("\"revision\":3", "\"revision\":0", 1),
            "wrong-type",
            "record.revision",
            "must be a positive integer",
        ),
        (
            good.replacen("\"note\":null", "\"note\":[]", 1),
            "wrong-type",
            "record.note",
            "must be a string or null, not array",
        ),
        (
            good.replacen(&digest, "sha256:00", 1),
            "wrong-type",
            "record.items[0].prior",
            DIGEST_RULE,
        ),
        (
            good.replacen(&"ab".repeat(20), &"AB".repeat(20), 1),
            "wrong-type",
            "record.commit",
            "must be a full object id: 40 lowercase hex characters",
        ),
        (
            good.replacen("\"red\"", "\"green\"", 1),
            "wrong-type",
            "record.items[1].colour",
            "must be red or deep-blue",
        ),
        (
            good.replacen("\"red\"", "3", 1),
            "wrong-type",
            "record.items[1].colour",
            "must be red or deep-blue, not integer",
        ),
        (
            good.replacen("\"flag\":true", "\"flag\":\"yes\"", 1),
            "wrong-type",
            "record.flag",
            "must be true or false, not string",
        ),
        (
            good.replacen("\"z\":9", "\"z\":\"9\"", 1),
            "wrong-type",
            "record.labels.z",
            "must be an integer, not string",
        ),
        (
            good.replacen("\"items\":[", "\"items\":[1,", 1),
            "wrong-type",
            "record.items[0]",
            "must be an object, not integer",
        ),
        (
            "[]".to_owned(),
            "wrong-type",
            "record",
            "must be an object, not array",
        ),
        (
            good.replacen("\"zeta\":7", "\"zeta\":7,\"zeta\":8", 1),
            "duplicate-key",
            "record",
            "duplicate key \"zeta\"",
        ),
        (
            good.replacen("\"zeta\":7", "\"zeta\":7.5", 1),
            "unsupported-number",
            "record",
            "",
        ),
        (
            good.replacen("\"zeta\":7", "\"zeta\":7e0", 1),
            "unsupported-number",
            "record",
            "",
        ),
        (good.replacen('}', "} x", 1), "syntax", "record", ""),
    ];
    let mut wrong = Vec::new();
    for (text, code, field, rule) in &cases {
        let got = refusal(text);
        let rule_ok = rule.is_empty() || got.2 == *rule;
        if got.0 != *code || got.1 != *field || !rule_ok {
            wrong.push(format!(
                "{text}\n  expected {code} {field}: {rule}\n  got {got:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let invalid = from_slice::<Record>(b"{\"zeta\":\"\xff\"}", "record").unwrap_err();
    assert_eq!(
        (invalid.kind, invalid.field.as_str()),
        (FieldErrorKind::Json(JsonError::InvalidUtf8), "record")
    );
}

#[test]
fn an_empty_root_gives_bare_paths() {
    let error = from_slice::<Item>(br#"{"name":"n","prior":null}"#, "").unwrap_err();
    assert_eq!(
        (error.code(), error.field.as_str()),
        ("missing-field", "colour")
    );
    let error = from_slice::<Vec<Item>>(br#"[{"name":1}]"#, "").unwrap_err();
    assert_eq!(error.field, "[0].name");
}

#[test]
fn size_and_depth_are_bounded() {
    let at_limit = "a".repeat(MAX_BYTES - 2);
    assert_eq!(to_canonical_bytes(&at_limit).unwrap().len(), MAX_BYTES);
    assert_eq!(
        to_canonical_bytes(&"a".repeat(MAX_BYTES - 1)),
        Err(JsonError::TooLarge { limit: MAX_BYTES })
    );
    let over = format!("\"{}\"", "a".repeat(MAX_BYTES - 1));
    assert_eq!(
        from_slice::<String>(over.as_bytes(), "s").unwrap_err().kind,
        FieldErrorKind::Json(JsonError::TooLarge { limit: MAX_BYTES })
    );
    let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
    assert_eq!(
        from_slice::<Value>(deep.as_bytes(), "v")
            .unwrap_err()
            .code(),
        "too-deep"
    );
    let fits = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
    let value: Value = from_slice(fits.as_bytes(), "v").unwrap();
    assert_eq!(encode(&value).unwrap(), fits.as_bytes());
}

#[test]
fn what_canonical_json_cannot_hold_is_not_written() {
    assert_eq!(to_value(&1.5f64).unwrap_err().code(), "unencodable");
    assert_eq!(
        to_value(&serde_bytes_like()).unwrap_err().code(),
        "unencodable"
    );
    let numbered: BTreeMap<u32, u8> = [(1, 1)].into_iter().collect();
    assert_eq!(to_value(&numbered).unwrap_err().code(), "unencodable");
    // Integers beyond the safe range are refused by the encoding, naming them.
    assert_eq!(
        to_canonical_bytes(&(MAX_SAFE_INTEGER as u64 + 1)),
        Err(JsonError::UnsafeInteger {
            value: MAX_SAFE_INTEGER + 1
        })
    );
    assert_eq!(
        to_canonical_bytes(&u64::MAX),
        Err(JsonError::UnsafeInteger { value: i64::MAX })
    );
    assert_eq!(
        to_canonical_bytes(&-MAX_SAFE_INTEGER).unwrap(),
        b"-9007199254740991"
    );
    // A literal field that is also a field of the struct would be written twice.
    #[derive(Serialize, Deserialize)]
    #[serde(remote = "Self")]
    struct Clash {
        protocol: String,
    }
    crate::literal_fields!(Clash { "protocol": "x/1" });
    assert_eq!(
        to_value(&Clash {
            protocol: "y".into()
        })
        .unwrap_err(),
        JsonError::DuplicateKey {
            key: "protocol".into()
        }
    );
}

/// A value serde writes as raw bytes.
fn serde_bytes_like() -> impl Serialize {
    struct Bytes;
    impl Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(b"\x00")
        }
    }
    Bytes
}

#[test]
fn values_read_from_other_formats_keep_canonical_rules() {
    let value = hand_built(&record());
    assert_eq!(from_value::<Value>(&value, "v").unwrap(), value);
    let json = serde_json::to_string(&value).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), value);
    assert!(serde_json::from_str::<Value>("1.5").is_err());
    assert!(serde_json::from_str::<Value>("9007199254740992").is_err());
    assert!(serde_json::from_str::<Value>("-9007199254740992").is_err());
    assert!(serde_json::from_str::<Value>(r#"{"a":1,"a":2}"#).is_err());
}

#[test]
fn variant_tags_name_the_tag_field() {
    let value = parse(br#"{"kind":"review","id":"x"}"#).unwrap();
    assert_eq!(
        variant_tag(&value, "checks[0]", "kind", &["process", "review"]).unwrap(),
        "review"
    );
    let other = parse(br#"{"kind":"shell"}"#).unwrap();
    let error = variant_tag(&other, "checks[0]", "kind", &["process", "review"]).unwrap_err();
    assert_eq!(
        (error.code(), error.field.as_str(), error.rule.as_str()),
        (
            "wrong-type",
            "checks[0].kind",
            "must be \"process\" or \"review\""
        )
    );
    let absent = parse(b"{}").unwrap();
    let error = variant_tag(&absent, "", "kind", &["a"]).unwrap_err();
    assert_eq!(
        (error.code(), error.field.as_str()),
        ("missing-field", "kind")
    );
    let error = variant_tag(&Value::Null, "c", "kind", &["a"]).unwrap_err();
    assert_eq!(error.rule, "must be an object, not null");
}
