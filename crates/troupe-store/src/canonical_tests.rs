//! [`canonical_text`] against the text a `serde_json::Value` of the same value writes.

use super::canonical_text;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// The text a `Value` of `value` writes: what the evidence chain hashes.
fn through_value<T: Serialize + ?Sized>(value: &T) -> String {
    crate::chain::json_text(&serde_json::to_value(value).expect("a value"))
}

#[track_caller]
fn same<T: Serialize + ?Sized>(value: &T) {
    assert_eq!(canonical_text(value).expect("written"), through_value(value));
}

#[derive(Serialize)]
struct Usage {
    output_tokens: u64,
    input_tokens: u64,
    ratio: f32,
    cost: f64,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text { text: String },
    ToolUse { id: String, name: String, input: Value },
}

#[derive(Serialize)]
enum Shapes {
    Unit,
    Newtype(Usage),
    Tuple(i8, String, Option<u32>),
    Struct { z: bool, a: Vec<Shapes>, m: BTreeMap<String, Value> },
}

#[derive(Serialize)]
struct Turn {
    role: &'static str,
    content: Vec<Block>,
    usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<String>,
    nothing: Option<String>,
    unit: (),
    shapes: Vec<Shapes>,
    #[serde(flatten)]
    extra: HashMap<String, Value>,
    bytes: serde_bytes_like::Bytes,
    letter: char,
    wide: i128,
    huge: u128,
}

/// A byte string serialized as bytes (`serialize_bytes`), as `serde_bytes` does.
mod serde_bytes_like {
    pub struct Bytes(pub Vec<u8>);
    impl serde::Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(&self.0)
        }
    }
}

fn turn() -> Turn {
    let mut extra = HashMap::new();
    extra.insert("zeta".to_owned(), json!({"b": [1, {"y": null, "x": "é\"\\\n\u{1}"}], "a": 2}));
    extra.insert("Alpha".to_owned(), json!(-0.0));
    extra.insert("émoji 🎭".to_owned(), json!("ünïcödé"));
    Turn {
        role: "assistant",
        content: vec![
            Block::Text { text: "k0, k1 and k2 are all 42.".into() },
            Block::ToolUse {
                id: "call_0".into(),
                name: "lookup".into(),
                input: json!({"key": "k0", "deep": {"b": 1, "a": []}}),
            },
        ],
        usage: Usage { output_tokens: 5, input_tokens: u64::MAX, ratio: 0.1, cost: 0.000_075 },
        stop: None,
        nothing: None,
        unit: (),
        shapes: vec![
            Shapes::Unit,
            Shapes::Newtype(Usage { output_tokens: 0, input_tokens: 1, ratio: f32::NAN, cost: f64::INFINITY }),
            Shapes::Tuple(-128, "t".into(), Some(7)),
            Shapes::Struct {
                z: true,
                a: vec![Shapes::Unit, Shapes::Tuple(1, String::new(), None)],
                m: BTreeMap::from([("b".into(), json!(1e300)), ("a".into(), json!(1.5e-7))]),
            },
        ],
        extra,
        bytes: serde_bytes_like::Bytes(vec![0, 1, 255]),
        letter: '"',
        wide: -(1 << 62),
        huge: u128::from(u64::MAX),
    }
}

#[test]
fn a_typed_value_is_written_as_its_value_writes_it() {
    same(&turn());
    // Sorted at every depth, the fields of a struct included.
    let text = canonical_text(&turn()).expect("written");
    assert!(text.starts_with(r#"{"Alpha":-0.0,"bytes":[0,1,255],"content":[{"text":"#), "{text}");
}

#[test]
fn values_scalars_and_empty_things_are_written_alike() {
    for value in [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(0.1),
        json!(1e-7),
        json!("text with \u{0} and \u{7f} and \u{2028}"),
        json!([]),
        json!({}),
        json!([[], {}, [{}]]),
        json!({"b": {"d": [], "c": {}}, "a": [null, false]}),
    ] {
        same(&value);
    }
    same(&0.1_f32);
    same(&f32::MAX);
    same(&f64::NEG_INFINITY);
    same(&'x');
    same(&Some("some"));
    same(&Option::<u8>::None);
    same(&((), 1_u8, "two"));
}

#[test]
fn map_keys_are_sorted_by_their_bytes_and_written_as_a_values_keys_are() {
    let mut keys: HashMap<String, u8> = HashMap::new();
    for (i, key) in ["b", "a", "B", "", "aa", "a\"", "a\\", "é", "z", "\u{1}", "10", "9"].into_iter().enumerate() {
        keys.insert(key.to_owned(), u8::try_from(i).expect("small"));
    }
    same(&keys);
    // Keys that are not strings, as a `Value` writes them.
    same(&BTreeMap::from([(10_i64, "ten"), (-2, "minus two"), (9, "nine")]));
    same(&HashMap::from([(true, 1), (false, 0)]));
    same(&BTreeMap::from([('b', 1), ('a', 2)]));
    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Second,
        First,
    }
    same(&BTreeMap::from([(Key::Second, 2), (Key::First, 1)]));
}

#[test]
fn of_one_key_given_twice_the_last_is_kept_as_a_map_keeps_it() {
    struct Twice;
    impl Serialize for Twice {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(None)?;
            map.serialize_entry("k", &1)?;
            map.serialize_entry("a", &json!({"n": 1}))?;
            map.serialize_entry("k", &2)?;
            map.serialize_entry("k", &[3])?;
            map.end()
        }
    }
    same(&Twice);
    assert_eq!(canonical_text(&Twice).expect("written"), r#"{"a":{"n":1},"k":[3]}"#);
}

#[test]
fn what_only_a_value_writes_goes_through_a_value() {
    // A raw value inside (parsed by a `Value`, its keys sorted), a float key, a number
    // beyond 64 bits (refused by a `Value`).
    let raw = serde_json::value::RawValue::from_string(r#"{"b": 1,  "a": 2}"#.to_owned()).expect("raw");
    same(&json!({"raw": "x"}));
    assert_eq!(canonical_text(&BTreeMap::from([("raw", &raw)])).expect("written"), r#"{"raw":{"a":2,"b":1}}"#);
    assert_eq!(canonical_text(&BTreeMap::from([(1_u8, 1)])).expect("written"), r#"{"1":1}"#);
    assert!(canonical_text(&u128::MAX).is_err(), "a `Value` cannot hold it");
    assert!(canonical_text(&i128::MIN).is_err());
    struct FloatKey;
    impl Serialize for FloatKey {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry(&1.5_f64, &"one and a half")?;
            map.end()
        }
    }
    same(&FloatKey);
}

#[test]
fn stored_json_reads_as_the_value_it_was_written_from_and_writes_that_values_text() {
    use crate::StoredJson;
    let value = json!({"b": [1, {"d": "é"}], "a": 0.5});
    let encoded = StoredJson::encode(&turn()).expect("encoded");
    assert_eq!(*encoded, serde_json::to_value(turn()).expect("a value"), "read as the value");
    assert_eq!(encoded.text(), through_value(&turn()));
    let kept = StoredJson::new(value.clone());
    assert_eq!(kept.text(), r#"{"a":0.5,"b":[1,{"d":"é"}]}"#);
    assert_eq!(kept.to_string(), kept.text());
    assert_eq!(kept, StoredJson::encode(&value).expect("encoded"));
    assert_eq!(kept["b"][1]["d"], "é", "it derefs to its value");
    // Through serde (a worker's store calls cross its pipe so) it is its value.
    let crossed: StoredJson = serde_json::from_str(&serde_json::to_string(&encoded).expect("out")).expect("in");
    assert_eq!(crossed.text(), encoded.text());
    assert_eq!(StoredJson::default().text(), "null");
    assert_eq!(kept.into_value(), value);
}

/// A thread's writer keeps its buffers from one text to the next: what one text left
/// behind (a value given up half-written for a `Value`, a large text, a text written from
/// inside another's `Serialize`) never shows in the next.
#[test]
fn texts_written_one_after_another_on_a_thread_are_each_their_own() {
    let raw = serde_json::value::RawValue::from_string(r#"{"z": [1, 2]}"#.to_owned()).expect("raw");
    // Given up after its first entries were written: `raw` sorts last.
    #[derive(Serialize)]
    struct Half<'a> {
        a: Value,
        b: &'a str,
        c: &'a serde_json::value::RawValue,
    }
    let half = Half { a: json!({"deep": [1, 2, 3]}), b: "x", c: &raw };
    let large = json!({"text": "é".repeat(100_000), "b": 1, "a": [2]});
    struct Nested;
    impl Serialize for Nested {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            // Another text written while this one is half-way.
            let inner = canonical_text(&json!({"y": 1, "x": 2})).map_err(serde::ser::Error::custom)?;
            let mut object = serializer.serialize_struct("Nested", 2)?;
            object.serialize_field("z", &inner)?;
            object.serialize_field("a", &true)?;
            object.end()
        }
    }
    for _ in 0..2 {
        same(&turn());
        assert_eq!(
            canonical_text(&BTreeMap::from([("k", &raw), ("a", &raw)])).expect("written"),
            r#"{"a":{"z":[1,2]},"k":{"z":[1,2]}}"#
        );
        same(&half);
        same(&large);
        same(&Nested);
        assert_eq!(canonical_text(&Nested).expect("written"), r#"{"a":true,"z":"{\"x\":2,\"y\":1}"}"#);
        same(&json!({}));
        same(&turn());
    }
}
