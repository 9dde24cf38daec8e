//! Every configuration key the validator accepts, read from the
//! validator's own types: a serde deserializer that records the fields
//! each table's `Deserialize` asks for (and every value an enum key takes)
//! instead of reading a document. `every_key_has_an_effect_or_says_why_not`
//! (in `effects.rs`) holds this list against its table, so a key added to
//! a layer without a test of its effect fails the suite.

use std::cell::RefCell;

use serde::de::value::{Error, StrDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer as _, Visitor};
use serde::forward_to_deserialize_any;

/// The dotted keys `T` accepts (`gate.rho`, `models[].name`), and for a key
/// whose value is one of named variants, each as `key=variant`.
pub(super) fn keys<'de, T: de::Deserialize<'de>>() -> Vec<String> {
    let seen = RefCell::new(Vec::new());
    T::deserialize(Walker {
        key: "",
        seen: &seen,
    })
    .expect("a walk gives every field a value of its type");
    let mut keys = seen.into_inner();
    keys.sort();
    keys.dedup();
    keys
}

/// Stands where a value of the key `key` would be.
#[derive(Clone, Copy)]
struct Walker<'w> {
    key: &'w str,
    seen: &'w RefCell<Vec<String>>,
}

impl Walker<'_> {
    fn leaf(self) {
        self.seen.borrow_mut().push(self.key.to_owned());
    }
}

impl<'de> de::Deserializer<'de> for Walker<'_> {
    type Error = Error;

    /// An untyped value (`[prompts]` as the engine reads it, `[ensemble]`):
    /// one key, an empty table.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.leaf();
        visitor.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(
            String,
            String,
        )>()))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.leaf();
        visitor.visit_bool(true)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.leaf();
        visitor.visit_u64(1)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.leaf();
        visitor.visit_f64(1.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.leaf();
        visitor.visit_str("x")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    /// A list: one element, standing for all (`models[]`); a list of plain
    /// values is one key.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let key = format!("{}[]", self.key);
        let element = Walker {
            key: &key,
            seen: self.seen,
        };
        let result = visitor.visit_seq(de::value::SeqDeserializer::new(std::iter::once(Element(
            element,
        ))));
        // `[]` alone is a list of values, named by its key.
        let mut seen = self.seen.borrow_mut();
        for recorded in seen.iter_mut() {
            if *recorded == key {
                *recorded = self.key.to_owned();
            }
        }
        result
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(Fields {
            walker: self,
            fields: fields.iter(),
            value_key: None,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        for variant in variants {
            self.seen
                .borrow_mut()
                .push(format!("{}={variant}", self.key));
        }
        visitor.visit_enum(variants[0].into_deserializer())
    }

    forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u128 f32 char bytes byte_buf unit unit_struct
        newtype_struct tuple tuple_struct map identifier ignored_any
    }
}

/// A list element: the walker, as a value its list's visitor can take.
struct Element<'w>(Walker<'w>);

impl<'de, 'w> de::IntoDeserializer<'de, Error> for Element<'w> {
    type Deserializer = Walker<'w>;

    fn into_deserializer(self) -> Walker<'w> {
        self.0
    }
}

/// A table's fields, each given once with a walker for its value.
struct Fields<'w> {
    walker: Walker<'w>,
    fields: std::slice::Iter<'static, &'static str>,
    value_key: Option<String>,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.next() else {
            return Ok(None);
        };
        self.value_key = Some(match self.walker.key {
            "" => (*field).to_owned(),
            parent => format!("{parent}.{field}"),
        });
        seed.deserialize(StrDeserializer::<Error>::new(field))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let key = self.value_key.take().expect("a key before its value");
        seed.deserialize(Walker {
            key: &key,
            seen: self.walker.seen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // Read by the walk only.
    struct Inner {
        depth: u32,
        mode: Mode,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)]
    enum Mode {
        Fast,
        VerySlow,
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: Option<String>,
        inner: Option<Inner>,
        rows: Option<Vec<Inner>>,
        words: Vec<String>,
    }

    #[test]
    fn the_walk_names_nested_tables_lists_and_enum_values() {
        assert_eq!(
            keys::<Outer>(),
            [
                "inner.depth",
                "inner.mode=fast",
                "inner.mode=very-slow",
                "name",
                "rows[].depth",
                "rows[].mode=fast",
                "rows[].mode=very-slow",
                "words",
            ]
        );
    }
}
