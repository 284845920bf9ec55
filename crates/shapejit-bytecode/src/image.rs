//! The `.sjb` bytecode image: a lowered [`Program`] and its weights in one
//! file that loads by memory-mapping, without copying the weights.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SJBIMAGE` |
//! | 8 | 4 | format version ([`VERSION`]) |
//! | 12 | 4 | CRC-32 of the metadata bytes |
//! | 16 | 8 | metadata offset (= [`HEADER_LEN`]) |
//! | 24 | 8 | metadata length |
//! | 32 | 8 | weight section offset (a multiple of [`ALIGN`]) |
//! | 40 | 8 | weight section length |
//! | 48 | 16 | zero (reserved) |
//! | 64 | … | metadata: JSON of the program without its constants' bytes, and one [`ConstEntry`] per constant |
//! | … | … | weight section: each constant's bytes at an [`ALIGN`]-aligned offset |
//!
//! The checksum covers the metadata (what the loader parses and trusts), not
//! the weights: checking those would read every page and undo the point of
//! mapping them. A corrupted weight changes numbers, never control flow.
//!
//! **Invariant:** a [`Program`] returned by [`load`] / [`from_bytes`] passed
//! [`crate::verify()`], and each constant is a slice of the mapped file
//! (every constant offset is 64-byte aligned and the map is page aligned).
//!
//! **Invariant:** no byte string makes the loader panic; truncated,
//! corrupted or wrong-version files are [`ImageError`]s naming the problem.

use crate::error::VerifyError;
use crate::program::Program;
use bytes::Bytes;
use shapejit_ir::{DType, Tensor};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file magic.
pub const MAGIC: [u8; 8] = *b"SJBIMAGE";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Header size; the metadata starts here.
pub const HEADER_LEN: usize = 64;
/// Alignment of the weight section and of every constant in it.
pub const ALIGN: usize = 64;

/// Where one constant's bytes are in the weight section.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConstEntry {
    /// element type
    pub dtype: DType,
    /// shape
    pub shape: Vec<usize>,
    /// byte offset from the start of the weight section (a multiple of [`ALIGN`])
    pub offset: u64,
    /// byte length
    pub len: u64,
}

/// The metadata block: the program with an empty constant table, and where
/// each constant's bytes are.
#[derive(serde::Serialize, serde::Deserialize)]
struct Metadata {
    program: Program,
    constants: Vec<ConstEntry>,
}

/// An error writing or loading an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be read, mapped or written.
    #[error("'{path}': {source}")]
    Io {
        /// the file
        path: PathBuf,
        /// the OS error
        source: std::io::Error,
    },
    /// The file does not start with the `.sjb` magic.
    #[error("not a shapejit bytecode image (bad magic)")]
    BadMagic,
    /// The image was written by another format version.
    #[error("image format version {found}, this build reads version {expected}")]
    Version {
        /// the file's version
        found: u32,
        /// the supported version
        expected: u32,
    },
    /// The file is shorter than its header says, or a range lies outside it.
    #[error("truncated or inconsistent image: {0}")]
    Truncated(String),
    /// The metadata checksum does not match.
    #[error(
        "metadata checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the file is corrupted"
    )]
    Checksum {
        /// the checksum in the header
        stored: u32,
        /// the checksum of the bytes read
        computed: u32,
    },
    /// The metadata is not valid (JSON or content).
    #[error("invalid metadata: {0}")]
    Metadata(String),
    /// The loaded program failed the bytecode verifier.
    #[error("the loaded program is invalid: {0}")]
    Verify(#[from] VerifyError),
}

fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Serializes a program into image bytes.
pub fn to_bytes(program: &Program) -> Result<Vec<u8>, ImageError> {
    let mut entries = Vec::with_capacity(program.constants.len());
    let mut weights_len = 0usize;
    for c in &program.constants {
        let len = c.bytes().len();
        entries.push(ConstEntry {
            dtype: c.dtype(),
            shape: c.shape().to_vec(),
            offset: weights_len as u64,
            len: len as u64,
        });
        weights_len = align_up(weights_len + len);
    }
    let meta = Metadata {
        program: Program {
            constants: Vec::new(),
            ..program.clone()
        },
        constants: entries,
    };
    let json = serde_json::to_vec(&meta).map_err(|e| ImageError::Metadata(e.to_string()))?;
    let weights_offset = align_up(HEADER_LEN + json.len());
    let mut out = Vec::with_capacity(weights_offset + weights_len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
    for field in [HEADER_LEN, json.len(), weights_offset, weights_len] {
        out.extend_from_slice(&(field as u64).to_le_bytes());
    }
    out.resize(HEADER_LEN, 0);
    out.extend_from_slice(&json);
    out.resize(weights_offset, 0);
    for (c, e) in program.constants.iter().zip(&meta.constants) {
        out.resize(weights_offset + e.offset as usize, 0);
        out.extend_from_slice(c.bytes());
    }
    out.resize(weights_offset + weights_len, 0);
    Ok(out)
}

/// Writes a program as an `.sjb` image.
pub fn write(program: &Program, path: &Path) -> Result<(), ImageError> {
    let bytes = to_bytes(program)?;
    let io = |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::create(path).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Maps an `.sjb` file and loads it (weights stay in the map).
pub fn load(path: &Path) -> Result<Program, ImageError> {
    let io = |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() < HEADER_LEN as u64 {
        return Err(ImageError::Truncated(format!(
            "the file is shorter than the {HEADER_LEN}-byte header"
        )));
    }
    // SAFETY: the map is read-only and owned by the returned `Bytes`, which the
    // constants keep alive. Another process truncating or rewriting the file
    // while it is mapped is outside what a loader can guard against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    from_bytes(Bytes::from_owner(map))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

/// A range `[offset, offset + len)` that must lie inside `total` bytes.
fn range(
    offset: u64,
    len: u64,
    total: usize,
    what: &str,
) -> Result<std::ops::Range<usize>, ImageError> {
    let end = offset.checked_add(len).filter(|&e| e <= total as u64);
    match end {
        Some(end) => Ok(offset as usize..end as usize),
        None => Err(ImageError::Truncated(format!(
            "{what} at {offset}+{len} lies outside the {total}-byte file"
        ))),
    }
}

/// Loads an image from bytes (constants become slices of `bytes`; when
/// `bytes` is not 64-byte aligned the misaligned ones are copied).
pub fn from_bytes(bytes: Bytes) -> Result<Program, ImageError> {
    if bytes.len() < HEADER_LEN {
        return Err(ImageError::Truncated(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header",
            bytes.len()
        )));
    }
    if bytes[..8] != MAGIC {
        return Err(ImageError::BadMagic);
    }
    let version = u32_at(&bytes, 8);
    if version != VERSION {
        return Err(ImageError::Version {
            found: version,
            expected: VERSION,
        });
    }
    let stored = u32_at(&bytes, 12);
    let meta = range(
        u64_at(&bytes, 16),
        u64_at(&bytes, 24),
        bytes.len(),
        "the metadata",
    )?;
    let weights = range(
        u64_at(&bytes, 32),
        u64_at(&bytes, 40),
        bytes.len(),
        "the weight section",
    )?;
    if weights.start % ALIGN != 0 {
        return Err(ImageError::Truncated(format!(
            "the weight section offset {} is not {ALIGN}-byte aligned",
            weights.start
        )));
    }
    let computed = crc32fast::hash(&bytes[meta.clone()]);
    if stored != computed {
        return Err(ImageError::Checksum { stored, computed });
    }
    let parsed: Metadata =
        serde_json::from_slice(&bytes[meta]).map_err(|e| ImageError::Metadata(e.to_string()))?;
    let section = bytes.slice(weights);
    let mut program = parsed.program;
    if !program.constants.is_empty() {
        return Err(ImageError::Metadata(
            "the metadata program carries constant bytes".into(),
        ));
    }
    program.constants = parsed
        .constants
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if e.offset % ALIGN as u64 != 0 {
                return Err(ImageError::Metadata(format!(
                    "constant {i} offset {} is not {ALIGN}-byte aligned",
                    e.offset
                )));
            }
            let r = range(e.offset, e.len, section.len(), &format!("constant {i}"))?;
            Tensor::from_bytes_or_copy(e.dtype, &e.shape, section.slice(r))
                .map_err(|err| ImageError::Metadata(format!("constant {i}: {err}")))
        })
        .collect::<Result<_, _>>()?;
    crate::verify(&program)?;
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shapejit_ir::{BinaryOp, GraphBuilder, Op, UnaryOp, shape};

    fn program() -> Program {
        let mut b = GraphBuilder::new("img");
        let x = b.input("x", DType::F32, shape!["batch", 3]);
        let w = b.constant(
            "w",
            Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap(),
        );
        let bias = b.constant("bias", Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap());
        let y = b.op(Op::MatMul, &[x, w]).unwrap();
        let y = b.op(Op::Binary(BinaryOp::Add), &[y, bias]).unwrap();
        let y = b.op(Op::Unary(UnaryOp::Relu), &[y]).unwrap();
        b.output("y", y).unwrap();
        crate::lower(&b.finish().unwrap()).unwrap()
    }

    #[test]
    fn round_trip_is_equal_and_weights_are_mapped() {
        let p = program();
        let dir = std::env::temp_dir().join(format!("sjb-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.sjb");
        write(&p, &path).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded, p);
        let bytes = to_bytes(&p).unwrap();
        let shared = Bytes::from(bytes);
        // A Vec's buffer is not necessarily 64-aligned; copy into one that is.
        let mut aligned = vec![0u8; shared.len() + ALIGN];
        let off = aligned.as_ptr().align_offset(ALIGN);
        aligned[off..off + shared.len()].copy_from_slice(&shared);
        let buf = Bytes::from(aligned).slice(off..off + shared.len());
        let from_mem = from_bytes(buf.clone()).unwrap();
        let span = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
        for c in &from_mem.constants {
            assert!(
                span.contains(&(c.bytes().as_ptr() as usize)),
                "constant copied instead of sliced"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn truncated_and_corrupted_images_are_errors() {
        let bytes = to_bytes(&program()).unwrap();
        for len in 0..bytes.len() {
            let res = from_bytes(Bytes::copy_from_slice(&bytes[..len]));
            assert!(res.is_err(), "a {len}-byte prefix loaded");
        }
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(matches!(
            from_bytes(Bytes::from(bad)),
            Err(ImageError::BadMagic)
        ));
        let mut bad = bytes.clone();
        bad[8] = 2;
        assert!(matches!(
            from_bytes(Bytes::from(bad)),
            Err(ImageError::Version {
                found: 2,
                expected: 1
            })
        ));
        let meta_len = u64_at(&bytes, 24) as usize;
        for at in (HEADER_LEN..HEADER_LEN + meta_len).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            let err = from_bytes(Bytes::from(bad)).unwrap_err();
            assert!(
                matches!(err, ImageError::Checksum { .. }),
                "flip at {at}: {err}"
            );
        }
        for at in 16..48 {
            let mut bad = bytes.clone();
            bad[at] ^= 0x80;
            assert!(
                from_bytes(Bytes::from(bad)).is_err(),
                "header flip at {at} loaded"
            );
        }
    }

    /// Rewrites the metadata and fixes the checksum, so the edit reaches the
    /// JSON parser and the verifier.
    fn with_metadata(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let meta_len = u64_at(bytes, 24) as usize;
        let mut meta = bytes[HEADER_LEN..HEADER_LEN + meta_len].to_vec();
        edit(&mut meta);
        let weights = &bytes[u64_at(bytes, 32) as usize..];
        let weights_offset = align_up(HEADER_LEN + meta.len());
        let mut out = bytes[..HEADER_LEN].to_vec();
        out[12..16].copy_from_slice(&crc32fast::hash(&meta).to_le_bytes());
        out[24..32].copy_from_slice(&(meta.len() as u64).to_le_bytes());
        out[32..40].copy_from_slice(&(weights_offset as u64).to_le_bytes());
        out.extend_from_slice(&meta);
        out.resize(weights_offset, 0);
        out.extend_from_slice(weights);
        out
    }

    #[test]
    fn checksummed_metadata_edits_never_panic() {
        let bytes = to_bytes(&program()).unwrap();
        let meta_len = u64_at(&bytes, 24) as usize;
        // A fixed pseudo-random walk (xorshift) over positions and replacement bytes.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let digits = b"0123456789-";
        let mut loaded = 0;
        for _ in 0..3000 {
            let (pos, byte) = (
                (next() as usize) % meta_len,
                digits[(next() as usize) % digits.len()],
            );
            let edited = with_metadata(&bytes, |m| m[pos] = byte);
            if from_bytes(Bytes::from(edited)).is_ok() {
                loaded += 1;
            }
        }
        // Some digit edits are harmless (a name, a constant's value); most are caught.
        assert!(loaded < 3000, "every edit loaded");
        let edited = with_metadata(&bytes, |m| m.truncate(m.len() / 2));
        assert!(matches!(
            from_bytes(Bytes::from(edited)),
            Err(ImageError::Metadata(_))
        ));
    }

    #[test]
    fn a_program_failing_the_verifier_is_rejected() {
        let mut p = program();
        p.n_regs = 0;
        let bytes = to_bytes(&p).unwrap();
        assert!(matches!(
            from_bytes(Bytes::from(bytes)),
            Err(ImageError::Verify(_))
        ));
    }
}
