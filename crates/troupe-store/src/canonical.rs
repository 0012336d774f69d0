//! [`canonical_text`]: a value's JSON as a `serde_json::Value` of it writes it (every
//! object's keys in byte order, no space), made without building the `Value`.
//!
//! An evidence entry's hash is taken over its payload's text in that form, so that the
//! entry verifies whatever order its fields were written in. A run seals a few entries
//! per model call; building each payload as a tree of `Value`s (a map node, a `String`
//! per key and per text) only to write it and drop it cost more than sealing it. This
//! writes each value once and sorts each object's entries as they stand in the output.

use serde::ser::{self, Impossible, Serialize};
use std::ops::Range;

/// The error of a value this cannot write as a `Value` would; the caller writes it
/// through a `Value` instead, which says what is wrong with it, if anything.
type Error = serde_json::Error;

/// `value` as the text `serde_json::to_string(&serde_json::to_value(value)?)` gives.
///
/// Falls back to building the `Value` for what is rare in a payload and subtle to write
/// alike: a raw JSON value inside it, a map keyed by numbers as floats, a number beyond
/// 64 bits.
pub fn canonical_text<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let written = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut writer) => writer.text_of(value),
        // A value whose `Serialize` writes a canonical text itself: a writer of its own.
        Err(_) => Writer::default().text_of(value),
    });
    match written {
        Some(text) => Ok(text),
        None => serde_json::to_value(value).map(|value| crate::chain::json_text(&value)),
    }
}

/// What a writer's buffers may keep between two texts; a larger text's are let go.
const KEPT: usize = 64 * 1024;

thread_local! {
    /// Each thread's writer, its buffers kept from one text to the next: written from
    /// empty buffers, a run's few payloads per model call grew them (and moved what they
    /// held) a hundred-odd times.
    static SCRATCH: std::cell::RefCell<Writer> = std::cell::RefCell::new(Writer::default());
}

/// The output, and the scratch space of the objects being written (objects nest: each
/// keeps its entries above those of the objects around it, and gives them back at its end).
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    /// Every open object's entries: where its key is in `keys`, where it is in `out`.
    entries: Vec<(Range<usize>, Range<usize>)>,
    /// Every open object's keys, as they are (not escaped).
    keys: String,
    /// An object's entries, while they are written out again in their keys' order.
    moved: Vec<u8>,
}

impl Writer {
    /// `value`'s canonical text, or `None` for what only a `Value` writes alike. The
    /// buffers are left empty, their room kept unless a large text grew them.
    fn text_of<T: Serialize + ?Sized>(&mut self, value: &T) -> Option<String> {
        let written = value.serialize(&mut *self);
        // Only text was written: whole strings and ASCII punctuation.
        let text = written.ok().map(|()| std::str::from_utf8(&self.out).map(str::to_owned).unwrap_or_default());
        if self.out.capacity().max(self.moved.capacity()).max(self.keys.capacity()) > KEPT {
            *self = Writer::default();
        } else {
            self.out.clear();
            self.entries.clear();
            self.keys.clear();
            self.moved.clear();
        }
        text
    }

    /// Writes `value` as serde_json writes it (numbers, escaped strings, `null`).
    fn json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut serde_json::Serializer::new(&mut self.out))
    }

    fn object(&mut self) -> Object<'_> {
        self.out.push(b'{');
        let (entries, keys, values) = (self.entries.len(), self.keys.len(), self.out.len());
        Object { writer: self, entries, keys, values, close_variant: false }
    }
}

/// `serialize_<type>` for each scalar type named, each handing its value to `self.<method>`.
macro_rules! scalars {
    ($method:ident: $($name:ident($ty:ty)),*) => {$(
        fn $name(self, v: $ty) -> Result<(), Error> {
            self.$method(&v)
        }
    )*};
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    // Scalars as serde_json writes them: as a `Value` of them writes them.
    scalars!(json: serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_u8(u8), serialize_u16(u16), serialize_u32(u32), serialize_u64(u64), serialize_f64(f64), serialize_char(char));

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        // A `Value` holds what fits in 64 bits, as such.
        match (i64::try_from(v), u64::try_from(v)) {
            (_, Ok(v)) => self.json(&v),
            (Ok(v), _) => self.json(&v),
            _ => Err(ser::Error::custom("a number beyond 64 bits")),
        }
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match u64::try_from(v) {
            Ok(v) => self.json(&v),
            Err(_) => Err(ser::Error::custom("a number beyond 64 bits")),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // A `Value` keeps an `f32` as the `f64` it converts to, and writes that.
        self.json(&f64::from(v))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.json(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // An array of numbers, in a `Value` as in serde_json's own output.
        self.json(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.json(&())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.json(&())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.json(&())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.json(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Error> {
        if name == RAW_VALUE {
            return Err(ser::Error::custom("a raw JSON value"));
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        // An object of one entry: nothing to sort.
        self.out.push(b'{');
        self.json(variant)?;
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array { writer: self, first: true, close_variant: false })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Array<'a>, Error> {
        self.out.push(b'{');
        self.json(variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Array { writer: self, first: true, close_variant: true })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(self.object())
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, Error> {
        if name == RAW_VALUE {
            return Err(ser::Error::custom("a raw JSON value"));
        }
        Ok(self.object())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, Error> {
        self.out.push(b'{');
        self.json(variant)?;
        self.out.push(b':');
        let mut object = self.object();
        object.close_variant = true;
        Ok(object)
    }
}

/// The name serde_json gives a raw JSON value as it serializes it.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// An array being written.
struct Array<'a> {
    writer: &'a mut Writer,
    first: bool,
    /// Whether it is a tuple variant's, inside `{"variant":…}`.
    close_variant: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.writer.out.push(b',');
        }
        value.serialize(&mut *self.writer)
    }

    fn close(self) -> Result<(), Error> {
        self.writer.out.push(b']');
        if self.close_variant {
            self.writer.out.push(b'}');
        }
        Ok(())
    }
}

/// The array traits, each an element at a time.
macro_rules! array {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Array<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

array!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object being written: its entries go to the output as they come, each as
/// `"key":value,`; at its end, unless their keys came in order already, they are written
/// again in their keys' order.
struct Object<'a> {
    writer: &'a mut Writer,
    /// Where its entries, keys and written entries start in the writer's buffers.
    entries: usize,
    keys: usize,
    values: usize,
    /// Whether it is a struct variant's, inside `{"variant":…}`.
    close_variant: bool,
}

impl Object<'_> {
    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let writer = &mut *self.writer;
        let start = writer.keys.len();
        key.serialize(KeyWriter(&mut writer.keys))?;
        let written = writer.out.len();
        writer.keys[start..].serialize(&mut serde_json::Serializer::new(&mut writer.out))?;
        writer.out.push(b':');
        writer.entries.push((start..writer.keys.len(), written..written));
        Ok(())
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)?;
        self.writer.out.push(b',');
        let end = self.writer.out.len();
        if let Some(entry) = self.writer.entries.last_mut() {
            entry.1.end = end;
        }
        Ok(())
    }

    fn close(self) -> Result<(), Error> {
        let Writer { out, entries, keys, moved } = &mut *self.writer;
        let mine = &mut entries[self.entries..];
        let key = |entry: &(Range<usize>, Range<usize>)| &keys[entry.0.clone()];
        // Usually in order already (a map's keys, a struct's fields in order): then as written.
        if !mine.windows(2).all(|pair| key(&pair[0]) < key(&pair[1])) {
            // Stable: of entries with the same key, the last is kept, as a map keeps it.
            mine.sort_by(|a, b| key(a).cmp(key(b)));
            moved.clear();
            moved.extend_from_slice(&out[self.values..]);
            out.truncate(self.values);
            for (i, (name, written)) in mine.iter().enumerate() {
                if mine.get(i + 1).is_some_and(|next| keys[next.0.clone()] == keys[name.clone()]) {
                    continue;
                }
                out.extend_from_slice(&moved[written.start - self.values..written.end - self.values]);
            }
        }
        // The last entry's comma, or the object's opening brace.
        match out.last_mut() {
            Some(last) if *last == b',' => *last = b'}',
            _ => out.push(b'}'),
        }
        if self.close_variant {
            out.push(b'}');
        }
        entries.truncate(self.entries);
        keys.truncate(self.keys);
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// The struct traits, a field at a time.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
                self.key(key)?;
                self.value(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// Writes an object's key as a `Value`'s map keeps it: a string as it is; a number, a
/// boolean, a character or a unit variant as its text. Anything else cannot be a key.
struct KeyWriter<'a>(&'a mut String);

impl KeyWriter<'_> {
    fn text(self, text: impl std::fmt::Display) -> Result<(), Error> {
        use std::fmt::Write;
        write!(self.0, "{text}").map_err(ser::Error::custom)
    }
}

fn not_a_key() -> Error {
    ser::Error::custom("a key that is not a string")
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    // As their text, as serde_json's keys of them are.
    scalars!(text: serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_i128(i128), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32), serialize_u64(u64), serialize_u128(u128));

    fn serialize_f32(self, _v: f32) -> Result<(), Error> {
        // serde_json writes a float key in its own shortest form: left to it.
        Err(not_a_key())
    }
    fn serialize_f64(self, _v: f64) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.0.push(v);
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.push_str(v);
        Ok(())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.0.push_str(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(not_a_key())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_a_key())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_a_key())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_a_key())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_a_key())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(not_a_key())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Err(not_a_key())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_a_key())
    }
}

#[cfg(test)]
#[path = "canonical_tests.rs"]
mod tests;
