//! A serialized histogram read back as what it claims to be, and no more: the HDR V2 +
//! DEFLATE bytes of a `histograms.ndjson` line are checked before `hdrhistogram` is handed
//! them. Its deserializer trusts the inner header: a forged `payload_len` of 0xFFFFFFF0 once
//! made it allocate a 4 GB buffer, and forged bounds (1 µs to 2⁶³ at 5 significant figures)
//! make it allocate a counts array of tens of megabytes per histogram. So the outer length
//! must be the bytes there are, the inflated size is capped (inflating stops at the cap, so a
//! DEFLATE bomb costs no more), the inner length must be the bytes that follow its header,
//! and the bounds and precision must be the ones this recorder writes. Parsing the two
//! 8-to-40-byte headers is done here by hand because the crate offers no way to inspect them
//! without allocating what they claim.
//!
//! Part of `analysis::recorder` (layer 4).

use std::io::Read;

use hdrhistogram::Histogram;

use super::{MAX_US, UnpackError};

/// The cookie of an HDR V2 + DEFLATE serialization, and of the V2 bytes inside it.
const COMPRESSED_COOKIE: u32 = 0x1c84_9314;
const V2_COOKIE: u32 = 0x1c84_9313;

/// The V2 header: cookie, payload length, normalizing offset, significant figures, lowest
/// and highest trackable values, integer-to-double ratio.
const V2_HEADER: usize = 40;

/// The most bytes a histogram of ours inflates to: its counts array (1 µs to 1 h at 3
/// significant figures is 23,552 counts) at 9 bytes a count, with room to spare.
const MAX_INFLATED: u64 = 1 << 20;

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// The V2 bytes inside `bytes` (an HDR V2 + DEFLATE serialization of a histogram with
/// `sigfig` significant figures from 1 µs to [`MAX_US`]), once both headers hold.
pub(super) fn inflate(bytes: &[u8], sigfig: u8) -> Result<Vec<u8>, UnpackError> {
    let bad = |what: String| Err(UnpackError(what));
    if bytes.len() < 8 || be32(bytes, 0) != COMPRESSED_COOKIE {
        return bad("not an HDR V2 + DEFLATE histogram (its cookie is wrong)".into());
    }
    let stated = be32(bytes, 4) as usize;
    if stated != bytes.len() - 8 {
        return bad(format!("its header says {stated} compressed bytes, but {} follow it", bytes.len() - 8));
    }
    let mut inner = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[8..])
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut inner)
        .map_err(|e| UnpackError(format!("its DEFLATE stream is damaged ({e})")))?;
    if inner.len() as u64 > MAX_INFLATED {
        return bad(format!("it inflates past {MAX_INFLATED} bytes, more than any histogram chaos writes"));
    }
    if inner.len() < V2_HEADER || be32(&inner, 0) != V2_COOKIE {
        return bad("its inner header is missing or its cookie is wrong".into());
    }
    let payload = be32(&inner, 4) as usize;
    if payload != inner.len() - V2_HEADER {
        return bad(format!(
            "its inner header says {payload} payload bytes, but {} follow it",
            inner.len() - V2_HEADER
        ));
    }
    let (digits, low, high) = (be32(&inner, 12), be64(&inner, 16), be64(&inner, 24));
    if (digits, low, high) != (u32::from(sigfig), 1, MAX_US) {
        return bad(format!(
            "its bounds are {low} to {high} µs at {digits} significant figures, not the recorder's 1 to {MAX_US} at {sigfig}"
        ));
    }
    Ok(inner)
}

/// The histogram the checked V2 bytes `inner` hold.
pub(super) fn read(inner: &[u8]) -> Result<Histogram<u64>, UnpackError> {
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(inner))
        .map_err(|e| UnpackError(format!("{e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(h: &Histogram<u64>) -> Vec<u8> {
        use hdrhistogram::serialization::Serializer as _;
        let mut b = Vec::new();
        hdrhistogram::serialization::V2DeflateSerializer::new().serialize(h, &mut b).unwrap();
        b
    }

    fn deflated(inner: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(inner).unwrap();
        let z = z.finish().unwrap();
        let mut out = COMPRESSED_COOKIE.to_be_bytes().to_vec();
        out.extend((z.len() as u32).to_be_bytes());
        out.extend(z);
        out
    }

    /// A histogram of ours reads back; a forged inner length (the 4 GB buffer), forged bounds
    /// or precision, a wrong outer length and a DEFLATE bomb are each refused, saying why.
    #[test]
    fn forged_headers_are_refused_before_anything_is_allocated() {
        let mut h = super::super::histogram(3);
        h.record(1234).unwrap();
        let good = packed(&h);
        let inner = inflate(&good, 3).unwrap();
        assert_eq!(read(&inner).unwrap(), h);
        let mut long = inner.clone();
        long[4..8].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
        let mut wide = inner.clone();
        wide[24..32].copy_from_slice(&(i64::MAX as u64).to_be_bytes());
        let mut outer = good.clone();
        outer.push(0);
        let bomb = deflated(&vec![0u8; 8 << 20]);
        let cases: [(&str, Vec<u8>, u8); 5] = [
            ("says 4294967280 payload bytes", deflated(&long), 3),
            ("bounds are 1 to 9223372036854775807", deflated(&wide), 3),
            ("at 3 significant figures, not the recorder's 1 to 3600000000 at 2", good.clone(), 2),
            ("compressed bytes, but", outer, 3),
            ("inflates past", bomb, 3),
        ];
        for (says, bytes, sigfig) in cases {
            let e = inflate(&bytes, sigfig).unwrap_err().0;
            assert!(e.contains(says), "expected {says:?}: {e}");
        }
    }
}
