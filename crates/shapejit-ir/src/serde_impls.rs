//! Hand-written serde impls for the types whose derive would expose internals:
//! [`Symbol`] and [`Dim`] serialize as their text (`"batch*32"`), [`Tensor`]
//! inline as `{dtype, shape, data}` with the raw little-endian bytes.
//!
//! **Invariant:** deserializing validates exactly like the constructors do
//! ([`Dim::parse`], [`Tensor::from_bytes_or_copy`]), so a corrupt image gives
//! an error, never an ill-formed value.

use crate::dim::{Dim, Symbol};
use crate::dtype::DType;
use crate::tensor::Tensor;
use bytes::Bytes;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

impl Serialize for Symbol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Symbol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Symbol, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Symbol::new(&name))
    }
}

impl Serialize for Dim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dim, D::Error> {
        let text = String::deserialize(d)?;
        Dim::parse(&text).map_err(|e| de::Error::custom(format!("bad dim '{text}': {e}")))
    }
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Tensor", 3)?;
        st.serialize_field("dtype", &self.dtype())?;
        st.serialize_field("shape", self.shape())?;
        st.serialize_field("data", &RawBytes(self.bytes()))?;
        st.end()
    }
}

/// Serializes bytes with `serialize_bytes` (compact in binary formats).
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Accepts bytes either as a byte string or as a sequence of integers
/// (what JSON gives back for `serialize_bytes`).
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteBuf, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tensor bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ByteBuf, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(ByteBuf(out))
            }
        }
        d.deserialize_bytes(V)
    }
}

#[derive(Deserialize)]
#[serde(rename = "Tensor")]
struct TensorRepr {
    dtype: DType,
    shape: Vec<usize>,
    data: ByteBuf,
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tensor, D::Error> {
        let repr = TensorRepr::deserialize(d)?;
        Tensor::from_bytes_or_copy(repr.dtype, &repr.shape, Bytes::from(repr.data.0))
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, GraphBuilder, Tensor, shape};

    #[test]
    fn graph_json_round_trip() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["batch*2", 3]);
        let w = b.constant(
            "w",
            Tensor::from_vec(vec![1.5f32, f32::from_bits(0x7fc0_0001), -0.0], &[3]).unwrap(),
        );
        let y = b.add(x, w).unwrap();
        b.output("y", y).unwrap();
        let g = b.finish().unwrap();
        let json = serde_json::to_string(&g).unwrap();
        assert!(json.contains("\"batch*2\""), "{json}");
        assert!(json.contains("\"dtype\":\"f32\""), "{json}");
        let back: crate::Graph = serde_json::from_str(&json).unwrap();
        assert_eq!(back.to_string(), g.to_string());
    }

    #[test]
    fn corrupt_tensors_and_dims_are_rejected() {
        let bad_len = r#"{"dtype":"f32","shape":[2],"data":[0,0,0]}"#;
        assert!(
            serde_json::from_str::<Tensor>(bad_len)
                .unwrap_err()
                .to_string()
                .contains("needs 8 bytes")
        );
        let bad_bool = r#"{"dtype":"bool","shape":[1],"data":[7]}"#;
        assert!(serde_json::from_str::<Tensor>(bad_bool).is_err());
        assert!(serde_json::from_str::<crate::Dim>("\"a+\"").is_err());
    }
}
