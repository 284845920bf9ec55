//! The subset of the ONNX protobuf messages the importer reads, declared with
//! `prost` from the field numbers of the ONNX specification (IR version ≤ 10).
//!
//! Fields the importer never reads (training info, functions, sparse tensors,
//! quantization annotations, ...) are not declared; prost skips them while
//! decoding. ONNX is a proto2 schema: scalar fields whose presence matters
//! (a dim's `dim_value` vs `dim_param`) are `Option`s.
//!
//! **Invariant:** `TensorProto::raw_data` is a `bytes::Bytes`; decoding from a
//! `Bytes` buffer (the memory-mapped file) slices it instead of copying.

use bytes::Bytes;

/// `ModelProto`: the top-level message of an `.onnx` file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// IR version of the file format.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// Operator sets the graph uses (one per domain).
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// Name of the tool that wrote the file.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// Version of that tool.
    #[prost(string, tag = "3")]
    pub producer_version: String,
    /// Reverse-DNS model namespace.
    #[prost(string, tag = "4")]
    pub domain: String,
    /// Model version.
    #[prost(int64, tag = "5")]
    pub model_version: i64,
    /// Free text.
    #[prost(string, tag = "6")]
    pub doc_string: String,
    /// The main graph.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// Free key/value metadata.
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// `OperatorSetIdProto`: an operator set domain and version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// `""` or `"ai.onnx"` for the default operator set.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// Operator set version.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `StringStringEntryProto`: a key/value pair.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    /// key
    #[prost(string, tag = "1")]
    pub key: String,
    /// value
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `GraphProto`: nodes, initializers, inputs and outputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// Nodes in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// Graph name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Constant tensors (weights), referenced by name.
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Free text.
    #[prost(string, tag = "10")]
    pub doc_string: String,
    /// Graph inputs (may also list initializers).
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// Graph outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    /// Types of intermediate values (informative; the importer re-infers them).
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// `NodeProto`: one operator application.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Input value names; `""` marks an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Output value names; `""` marks an unused optional output.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// Node name (may be empty).
    #[prost(string, tag = "3")]
    pub name: String,
    /// Operator type, e.g. `"Conv"`.
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// Operator set domain (`""` = default).
    #[prost(string, tag = "7")]
    pub domain: String,
    /// Attributes.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// Free text.
    #[prost(string, tag = "6")]
    pub doc_string: String,
}

/// `AttributeProto.AttributeType` values.
pub mod attribute_type {
    /// a float
    pub const FLOAT: i32 = 1;
    /// an int64
    pub const INT: i32 = 2;
    /// bytes
    pub const STRING: i32 = 3;
    /// a tensor
    pub const TENSOR: i32 = 4;
    /// a graph
    pub const GRAPH: i32 = 5;
    /// floats
    pub const FLOATS: i32 = 6;
    /// int64s
    pub const INTS: i32 = 7;
    /// byte strings
    pub const STRINGS: i32 = 8;
    /// tensors
    pub const TENSORS: i32 = 9;
    /// graphs
    pub const GRAPHS: i32 = 10;
}

/// `AttributeProto`: a named attribute of a node.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// Attribute name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Set inside function bodies: refers to an attribute of the caller.
    #[prost(string, tag = "21")]
    pub ref_attr_name: String,
    /// Free text.
    #[prost(string, tag = "13")]
    pub doc_string: String,
    /// Which field holds the value (see [`attribute_type`]); 0 in very old files.
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    /// float value
    #[prost(float, tag = "2")]
    pub f: f32,
    /// int value
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// bytes value
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// tensor value
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// graph value
    #[prost(message, optional, tag = "6")]
    pub g: Option<GraphProto>,
    /// float list
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    /// int list
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    /// bytes list
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// tensor list
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    /// graph list
    #[prost(message, repeated, tag = "11")]
    pub graphs: Vec<GraphProto>,
}

/// `ValueInfoProto`: a value's name and type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// Value name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value type.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    /// Free text.
    #[prost(string, tag = "3")]
    pub doc_string: String,
}

/// `TypeProto` (only the tensor case of its `oneof`; sequence, map, optional
/// and sparse types are not declared and decode as "no tensor type").
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    /// The tensor type.
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
    /// Free text denotation.
    #[prost(string, tag = "6")]
    pub denotation: String,
}

/// `TypeProto.Tensor`: element type and (optional) shape.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProtoTensor {
    /// A [`data_type`] value.
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    /// The shape; absent means the rank is unknown.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto`: a list of dims.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// The dims.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<TensorShapeDim>,
}

/// `TensorShapeProto.Dimension`: a known size, a named symbol, or neither.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeDim {
    /// A known size.
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    /// A symbol name.
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
    /// Free text denotation.
    #[prost(string, tag = "3")]
    pub denotation: String,
}

/// `TensorProto.DataType` values.
pub mod data_type {
    /// float32
    pub const FLOAT: i32 = 1;
    /// uint8
    pub const UINT8: i32 = 2;
    /// int8
    pub const INT8: i32 = 3;
    /// uint16
    pub const UINT16: i32 = 4;
    /// int16
    pub const INT16: i32 = 5;
    /// int32
    pub const INT32: i32 = 6;
    /// int64
    pub const INT64: i32 = 7;
    /// string
    pub const STRING: i32 = 8;
    /// bool
    pub const BOOL: i32 = 9;
    /// float16
    pub const FLOAT16: i32 = 10;
    /// float64
    pub const DOUBLE: i32 = 11;
    /// uint32
    pub const UINT32: i32 = 12;
    /// uint64
    pub const UINT64: i32 = 13;
    /// complex64
    pub const COMPLEX64: i32 = 14;
    /// complex128
    pub const COMPLEX128: i32 = 15;
    /// bfloat16
    pub const BFLOAT16: i32 = 16;
    /// float8 e4m3fn
    pub const FLOAT8E4M3FN: i32 = 17;
    /// float8 e4m3fnuz
    pub const FLOAT8E4M3FNUZ: i32 = 18;
    /// float8 e5m2
    pub const FLOAT8E5M2: i32 = 19;
    /// float8 e5m2fnuz
    pub const FLOAT8E5M2FNUZ: i32 = 20;
    /// uint4, two per byte
    pub const UINT4: i32 = 21;
    /// int4, two per byte
    pub const INT4: i32 = 22;
    /// float4 e2m1, two per byte
    pub const FLOAT4E2M1: i32 = 23;
    /// float8 e8m0
    pub const FLOAT8E8M0: i32 = 24;
    /// uint2, four per byte
    pub const UINT2: i32 = 25;
    /// int2, four per byte
    pub const INT2: i32 = 26;

    /// The ONNX name of a data type, for error messages.
    pub fn name(code: i32) -> String {
        let known = match code {
            0 => "UNDEFINED",
            FLOAT => "FLOAT",
            UINT8 => "UINT8",
            INT8 => "INT8",
            UINT16 => "UINT16",
            INT16 => "INT16",
            INT32 => "INT32",
            INT64 => "INT64",
            STRING => "STRING",
            BOOL => "BOOL",
            FLOAT16 => "FLOAT16",
            DOUBLE => "DOUBLE",
            UINT32 => "UINT32",
            UINT64 => "UINT64",
            COMPLEX64 => "COMPLEX64",
            COMPLEX128 => "COMPLEX128",
            BFLOAT16 => "BFLOAT16",
            FLOAT8E4M3FN => "FLOAT8E4M3FN",
            FLOAT8E4M3FNUZ => "FLOAT8E4M3FNUZ",
            FLOAT8E5M2 => "FLOAT8E5M2",
            FLOAT8E5M2FNUZ => "FLOAT8E5M2FNUZ",
            UINT4 => "UINT4",
            INT4 => "INT4",
            FLOAT4E2M1 => "FLOAT4E2M1",
            FLOAT8E8M0 => "FLOAT8E8M0",
            UINT2 => "UINT2",
            INT2 => "INT2",
            _ => return format!("unknown data type {code}"),
        };
        known.to_string()
    }
}

/// `TensorProto.DataLocation`: the data is in an external file.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;

/// `TensorProto`: a constant tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// Shape.
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// A [`data_type`] value.
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// float elements (FLOAT, COMPLEX64).
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// int32 elements (INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16 bits).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// string elements
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    /// int64 elements
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// Tensor name (the value name for initializers).
    #[prost(string, tag = "8")]
    pub name: String,
    /// Free text.
    #[prost(string, tag = "12")]
    pub doc_string: String,
    /// Little-endian row-major element bytes (takes precedence over typed fields).
    #[prost(bytes = "bytes", tag = "9")]
    pub raw_data: Bytes,
    /// Where external data lives: `location`, `offset`, `length`, `checksum`.
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// 0 = in this message, 1 = [`DATA_LOCATION_EXTERNAL`].
    #[prost(int32, tag = "14")]
    pub data_location: i32,
    /// double elements
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// uint64 / uint32 elements
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
}
