//! The `.sjb` bytecode image: a lowered [`Program`] and its weights in one
//! file that loads by memory-mapping, without copying the weights.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SJBIMAGE` |
//! | 8 | 4 | format version ([`VERSION`]) |
//! | 12 | 4 | CRC-32 of bytes 16..64 of the header followed by the metadata |
//! | 16 | 8 | metadata offset (= [`HEADER_LEN`]) |
//! | 24 | 8 | metadata length |
//! | 32 | 8 | weight section offset (the metadata's end, rounded up to [`ALIGN`]) |
//! | 40 | 8 | weight section length (the rest of the file) |
//! | 48 | 4 | flags: bit 0 = the weight checksum is present |
//! | 52 | 4 | CRC-32 of the weight section (when flagged; else zero) |
//! | 56 | 8 | zero (reserved) |
//! | 64 | … | metadata: JSON of the program without its constants' bytes, and one [`ConstEntry`] per constant |
//! | … | … | weight section: the constants' bytes, in order, each at the previous one's end rounded up to [`ALIGN`] |
//!
//! The header checksum covers every offset and length and the metadata (all the
//! loader parses and trusts), and each of them is checked against the file and
//! the metadata: the layout is the only one [`to_bytes`] writes, so a patched
//! offset is an error, never a read of the wrong bytes. The weights are covered
//! only by the optional weight checksum ([`WriteOptions::checksum_weights`],
//! `shapejit compile --checksum-weights`): checking it reads every page once at
//! load. Without it a corrupted weight changes numbers, never control flow.
//!
//! [`write`] writes a temporary file in the target's directory and renames it
//! over the target, so a process that has the old file mapped keeps its
//! contents (the old inode lives until it is unmapped), never a truncated map.
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
/// The format version this build writes and reads (3: a batch norm may carry a
/// fused activation, which a version-2 reader would silently drop).
pub const VERSION: u32 = 3;
/// Header flag: the weight section's CRC-32 is stored at offset 52.
pub const FLAG_WEIGHT_CHECKSUM: u32 = 1;
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
    /// The header and metadata checksum does not match.
    #[error(
        "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the file is corrupted"
    )]
    Checksum {
        /// the checksum in the header
        stored: u32,
        /// the checksum of the bytes read
        computed: u32,
    },
    /// The weight checksum does not match.
    #[error(
        "weight checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the weights are corrupted"
    )]
    WeightChecksum {
        /// the checksum in the header
        stored: u32,
        /// the checksum of the weight section
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

/// How [`to_bytes_with`] / [`write_with`] write an image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// store a CRC-32 of the weight section, checked on every load
    pub checksum_weights: bool,
}

/// The checksum of the header fields after it and the metadata.
fn header_crc(fields: &[u8], meta: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(fields);
    h.update(meta);
    h.finalize()
}

/// Serializes a program into image bytes (no weight checksum).
pub fn to_bytes(program: &Program) -> Result<Vec<u8>, ImageError> {
    to_bytes_with(program, WriteOptions::default())
}

/// Serializes a program into image bytes.
pub fn to_bytes_with(program: &Program, options: WriteOptions) -> Result<Vec<u8>, ImageError> {
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
    out.resize(HEADER_LEN, 0);
    out.extend_from_slice(&json);
    out.resize(weights_offset, 0);
    for (c, e) in program.constants.iter().zip(&meta.constants) {
        out.resize(weights_offset + e.offset as usize, 0);
        out.extend_from_slice(c.bytes());
    }
    out.resize(weights_offset + weights_len, 0);
    let (flags, weight_crc) = if options.checksum_weights {
        (
            FLAG_WEIGHT_CHECKSUM,
            crc32fast::hash(&out[weights_offset..]),
        )
    } else {
        (0, 0)
    };
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&[0; 4]);
    for field in [HEADER_LEN, json.len(), weights_offset, weights_len] {
        header.extend_from_slice(&(field as u64).to_le_bytes());
    }
    header.extend_from_slice(&flags.to_le_bytes());
    header.extend_from_slice(&weight_crc.to_le_bytes());
    header.resize(HEADER_LEN, 0);
    let crc = header_crc(&header[16..], &json);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    out[..HEADER_LEN].copy_from_slice(&header);
    Ok(out)
}

/// Writes a program as an `.sjb` image (no weight checksum); see [`write_with`].
pub fn write(program: &Program, path: &Path) -> Result<(), ImageError> {
    write_with(program, path, WriteOptions::default())
}

/// Writes a program as an `.sjb` image: into a new temporary file in the
/// target's directory, synced, then renamed over `path` (atomic on POSIX), so
/// readers see the old file or the new one, never a partial or truncated one.
pub fn write_with(program: &Program, path: &Path, options: WriteOptions) -> Result<(), ImageError> {
    let bytes = to_bytes_with(program, options)?;
    let io = |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io(std::io::Error::other("the path names no file")))?;
    let (file, tmp) = create_temp(dir, name).map_err(io)?;
    let written = (|| {
        let mut file = file;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        std::fs::remove_file(&tmp).ok();
        return Err(io(e));
    }
    Ok(())
}

/// A new file `.NAME.PID.N.tmp` in `dir` (created exclusively).
fn create_temp(dir: &Path, name: &std::ffi::OsStr) -> std::io::Result<(std::fs::File, PathBuf)> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => return Ok((file, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Maps an `.sjb` file and loads it (weights stay in the map). Only a regular
/// file is opened.
pub fn load(path: &Path) -> Result<Program, ImageError> {
    let io = |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = shapejit_ir::file::open_regular(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() < HEADER_LEN as u64 {
        return Err(ImageError::Truncated(format!(
            "the file is shorter than the {HEADER_LEN}-byte header"
        )));
    }
    // SAFETY: the map is read-only and owned by the returned `Bytes`, which the
    // constants keep alive. `write` replaces an image by renaming a new file
    // over it, which leaves this mapping's inode intact; another program
    // truncating the file in place is outside what a loader can guard against.
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

/// A header field that must have exactly the value the layout gives it.
fn expect_field(what: &str, found: u64, expected: u64) -> Result<(), ImageError> {
    if found != expected {
        return Err(ImageError::Truncated(format!(
            "{what} is {found}, the layout needs {expected}"
        )));
    }
    Ok(())
}

/// The metadata's range: what the header checksum covers besides the header.
fn metadata_range(bytes: &[u8]) -> Result<std::ops::Range<usize>, ImageError> {
    let total = bytes.len() as u64;
    let meta_len = u64_at(bytes, 24);
    if meta_len > total - HEADER_LEN as u64 {
        return Err(ImageError::Truncated(format!(
            "the metadata length {meta_len} runs past the {total}-byte file"
        )));
    }
    Ok(HEADER_LEN..HEADER_LEN + meta_len as usize)
}

/// Checks the (checksummed) header's layout against the file: returns the
/// weight section's range and the flags.
fn layout(bytes: &[u8], meta_end: usize) -> Result<(std::ops::Range<usize>, u32), ImageError> {
    let total = bytes.len() as u64;
    expect_field("the metadata offset", u64_at(bytes, 16), HEADER_LEN as u64)?;
    let weights_offset = align_up(meta_end);
    expect_field(
        "the weight section offset",
        u64_at(bytes, 32),
        weights_offset as u64,
    )?;
    let weights_len = total.checked_sub(weights_offset as u64).ok_or_else(|| {
        ImageError::Truncated(format!(
            "the weight section at {weights_offset} starts past the {total}-byte file"
        ))
    })?;
    expect_field("the weight section length", u64_at(bytes, 40), weights_len)?;
    let flags = u32_at(bytes, 48);
    if flags & !FLAG_WEIGHT_CHECKSUM != 0 || u64_at(bytes, 56) != 0 {
        return Err(ImageError::Metadata(format!(
            "unknown header flags {flags:#x} or reserved bytes set"
        )));
    }
    if flags & FLAG_WEIGHT_CHECKSUM == 0 && u32_at(bytes, 52) != 0 {
        return Err(ImageError::Metadata(
            "a weight checksum without its flag".into(),
        ));
    }
    Ok((weights_offset..bytes.len(), flags))
}

/// Checks the constant table against the layout [`to_bytes`] writes: each
/// constant right after the previous one (rounded up to [`ALIGN`]), exactly as
/// long as its dtype and shape need, the last one ending the section.
fn check_entries(entries: &[ConstEntry], section_len: usize) -> Result<(), ImageError> {
    let mut expected = 0u64;
    for (i, e) in entries.iter().enumerate() {
        if e.offset != expected {
            return Err(ImageError::Metadata(format!(
                "constant {i} is at offset {}, the layout puts it at {expected}",
                e.offset
            )));
        }
        let needed = e
            .shape
            .iter()
            .try_fold(e.dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64));
        if needed != Some(e.len) {
            return Err(ImageError::Metadata(format!(
                "constant {i} ({}{:?}) is {} bytes long, its type needs {needed:?}",
                e.dtype, e.shape, e.len
            )));
        }
        expected = e
            .offset
            .checked_add(e.len)
            .and_then(|end| end.checked_next_multiple_of(ALIGN as u64))
            .ok_or_else(|| ImageError::Metadata(format!("constant {i} overflows")))?;
    }
    expect_field("the weight section length", section_len as u64, expected)
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
    let meta = metadata_range(&bytes)?;
    let computed = header_crc(&bytes[16..HEADER_LEN], &bytes[meta.clone()]);
    if stored != computed {
        return Err(ImageError::Checksum { stored, computed });
    }
    let (weights, flags) = layout(&bytes, meta.end)?;
    if flags & FLAG_WEIGHT_CHECKSUM != 0 {
        let stored = u32_at(&bytes, 52);
        let computed = crc32fast::hash(&bytes[weights.clone()]);
        if stored != computed {
            return Err(ImageError::WeightChecksum { stored, computed });
        }
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
    check_entries(&parsed.constants, section.len())?;
    program.constants = parsed
        .constants
        .iter()
        .enumerate()
        .map(|(i, e)| {
            // Invariant: `check_entries` put every entry inside the section.
            let r = e.offset as usize..(e.offset + e.len) as usize;
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
        bad[8] = 1;
        assert!(matches!(
            from_bytes(Bytes::from(bad)),
            Err(ImageError::Version {
                found: 1,
                expected: VERSION
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
        for at in 12..HEADER_LEN {
            let mut bad = bytes.clone();
            bad[at] ^= 0x80;
            assert!(
                from_bytes(Bytes::from(bad)).is_err(),
                "header flip at {at} loaded"
            );
        }
    }

    /// Sets a header field and fixes the checksum, as a forger would.
    fn with_field(bytes: &[u8], at: usize, value: u64) -> Bytes {
        let mut out = bytes.to_vec();
        out[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let meta_len = u64_at(bytes, 24) as usize;
        let crc = header_crc(
            &out[16..HEADER_LEN],
            &out[HEADER_LEN..HEADER_LEN + meta_len],
        );
        out[12..16].copy_from_slice(&crc.to_le_bytes());
        Bytes::from(out)
    }

    #[test]
    fn offsets_are_checked_against_the_layout_even_with_a_valid_checksum() {
        let bytes = to_bytes(&program()).unwrap();
        // The weight offset patched to 0 would read the weights from the header.
        let err = from_bytes(with_field(&bytes, 32, 0))
            .unwrap_err()
            .to_string();
        let weights = u64_at(&bytes, 32);
        assert_eq!(
            err,
            format!(
                "truncated or inconsistent image: the weight section offset is 0, the layout needs {weights}"
            )
        );
        let err = from_bytes(with_field(&bytes, 16, 0))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the metadata offset is 0, the layout needs 64"),
            "{err}"
        );
        let err = from_bytes(with_field(&bytes, 40, 64))
            .unwrap_err()
            .to_string();
        assert!(err.contains("the weight section length is 64"), "{err}");
        // Unchecksummed: the header CRC covers every offset.
        let mut bad = bytes.clone();
        bad[32..40].copy_from_slice(&0u64.to_le_bytes());
        assert!(matches!(
            from_bytes(Bytes::from(bad)),
            Err(ImageError::Checksum { .. })
        ));
        // A constant moved inside the metadata (checksum fixed).
        let edited = with_metadata(&bytes, |m| {
            let text = String::from_utf8(m.clone()).unwrap();
            *m = text
                .replacen("\"offset\":64", "\"offset\":0", 1)
                .into_bytes();
        });
        let err = from_bytes(Bytes::from(edited)).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid metadata: constant 1 is at offset 0, the layout puts it at 64"
        );
        let edited = with_metadata(&bytes, |m| {
            let text = String::from_utf8(m.clone()).unwrap();
            *m = text.replacen("\"len\":24", "\"len\":16", 1).into_bytes();
        });
        let err = from_bytes(Bytes::from(edited)).unwrap_err().to_string();
        assert!(
            err.contains("constant 0 (f32[3, 2]) is 16 bytes long, its type needs Some(24)"),
            "{err}"
        );
    }

    #[test]
    fn the_weight_checksum_catches_a_flipped_weight() {
        let p = program();
        let plain = to_bytes(&p).unwrap();
        let checked = to_bytes_with(
            &p,
            WriteOptions {
                checksum_weights: true,
            },
        )
        .unwrap();
        assert_eq!(plain.len(), checked.len());
        let weights = u64_at(&checked, 32) as usize;
        let flip = |bytes: &[u8]| {
            let mut bad = bytes.to_vec();
            bad[weights + 4] ^= 0x01;
            Bytes::from(bad)
        };
        let err = from_bytes(flip(&checked)).unwrap_err();
        assert!(matches!(err, ImageError::WeightChecksum { .. }), "{err}");
        assert!(
            err.to_string().contains("the weights are corrupted"),
            "{err}"
        );
        assert_eq!(from_bytes(Bytes::from(checked)).unwrap(), p);
        // Without the checksum the flip loads: numbers change, control flow cannot.
        let loaded = from_bytes(flip(&plain)).unwrap();
        assert_ne!(loaded.constants[0], p.constants[0]);
    }

    #[test]
    fn a_mapped_image_survives_being_rewritten() {
        let dir = std::env::temp_dir().join(format!("sjb-rename-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.sjb");
        let p = program();
        write(&p, &path).unwrap();
        let mapped = load(&path).unwrap();
        let mut other = p.clone();
        other.constants[0] =
            Tensor::from_vec(vec![9f32, 9.0, 9.0, 9.0, 9.0, 9.0], &[3, 2]).unwrap();
        write(&other, &path).unwrap();
        // The old map still reads the old weights; the file has the new ones.
        assert_eq!(mapped, p);
        assert_eq!(load(&path).unwrap(), other);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["m.sjb"], "a temporary file was left behind");
        std::fs::remove_dir_all(&dir).ok();
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
        out[24..32].copy_from_slice(&(meta.len() as u64).to_le_bytes());
        out[32..40].copy_from_slice(&(weights_offset as u64).to_le_bytes());
        let crc = header_crc(&out[16..HEADER_LEN], &meta);
        out[12..16].copy_from_slice(&crc.to_le_bytes());
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
    fn a_huge_register_count_is_an_error_not_an_allocation() {
        // Issue 12: `n_regs = 2^31` in the metadata once made verification allocate
        // 2.4 GB and abort. The count is checked against the instructions first.
        let mut p = program();
        let named = p.n_regs;
        p.n_regs = 1 << 31;
        let bytes = to_bytes(&p).unwrap();
        let err = from_bytes(Bytes::from(bytes)).unwrap_err();
        assert!(matches!(err, ImageError::Verify(_)), "{err:?}");
        assert!(
            err.to_string().ends_with(&format!(
                "the program declares 2147483648 registers, its instructions name {named}"
            )),
            "{err}"
        );
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
