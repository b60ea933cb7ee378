//! Fuzz entry points for the 8b/10b decoder and the comma aligner.

use crate::code8b10b::{CommaAligner, Decoder, Encoder};
use crate::error::Error;
use crate::symbol::{control, Disparity, Symbol};

/// Most code groups (or symbols) one input is cut to, so that everything fits in fixed arrays.
const MAX_CODES: usize = 512;

fn disparity(bit: u8) -> Disparity {
    if bit & 1 == 0 {
        Disparity::Negative
    } else {
        Disparity::Positive
    }
}

/// The decoder over arbitrary code groups. Byte 0: bit 0 the starting running disparity; bit 1 set means
/// the rest is payload to encode first (from the other disparity if bit 2 is set), with bit `41 * (byte0 >> 3)`
/// of the stream flipped when that is non-zero; otherwise the rest is little-endian `u16` code groups.
/// Checks: no panic; only the decoding errors, at a position inside the input; the fast data path agrees
/// with the scalar decoder (same result, same bytes before an error, same running disparity after); and a
/// stream that decodes re-encodes, from the same running disparity, to exactly the input.
pub fn decode_8b10b(data: &[u8]) {
    let [mode, rest @ ..] = data else {
        return;
    };
    let rd = disparity(*mode);
    let mut codes = [0u16; MAX_CODES];
    let len = if mode & 2 == 0 {
        let pairs = rest.chunks_exact(2).take(MAX_CODES);
        let len = pairs.len();
        for (c, pair) in codes.iter_mut().zip(pairs) {
            *c = u16::from_le_bytes([pair[0], pair[1]]);
        }
        len
    } else {
        let payload = &rest[..rest.len().min(MAX_CODES)];
        let sent_from = if mode & 4 == 0 { rd } else { rd.flipped() };
        Encoder::with_disparity(sent_from)
            .encode_data(payload, &mut codes[..payload.len()])
            .unwrap();
        let flip = usize::from(mode >> 3) * 41;
        if flip != 0 && flip / 10 < payload.len() {
            codes[flip / 10] ^= 1 << (flip % 10);
        }
        payload.len()
    };
    let codes = &codes[..len];

    // The scalar reference: decode_symbols, with K symbols turned into what decode_data reports.
    let mut scalar = Decoder::new(rd);
    let mut symbols = [Symbol::Data(0); MAX_CODES];
    let scalar_result = scalar.decode_symbols(codes, &mut symbols[..len]);
    let decoded = match scalar_result {
        Ok(n) => n,
        Err(Error::InvalidCodeGroup { position, code })
        | Err(Error::DisparityError { position, code, .. }) => {
            assert!(position < len && code == codes[position]);
            position
        }
        Err(e) => panic!("unexpected error {e:?}"),
    };
    let first_control = symbols[..decoded].iter().position(|s| s.is_control());

    let mut fast = Decoder::new(rd);
    let mut bytes = [0u8; MAX_CODES];
    let fast_result = fast.decode_data(codes, &mut bytes[..len]);
    match first_control {
        Some(position) => {
            let byte = symbols[position].byte();
            assert_eq!(fast_result, Err(Error::UnexpectedControl { position, byte }));
            // Both decoders stop there: replay the scalar one that far to compare disparities.
            let mut replay = Decoder::new(rd);
            replay
                .decode_symbols(&codes[..=position], &mut symbols[..=position])
                .unwrap();
            assert_eq!(fast.disparity(), replay.disparity());
        }
        None => {
            assert_eq!(fast_result, scalar_result.map(|_| ()));
            assert_eq!(fast.disparity(), scalar.disparity());
        }
    }
    let agreed = first_control.unwrap_or(decoded);
    for (s, b) in symbols[..agreed].iter().zip(&bytes[..agreed]) {
        assert_eq!(*s, Symbol::Data(*b));
    }

    if scalar_result.is_ok() {
        let mut again = [0u16; MAX_CODES];
        let mut encoder = Encoder::with_disparity(rd);
        encoder
            .encode_symbols(&symbols[..len], &mut again[..len])
            .unwrap();
        assert_eq!(&again[..len], codes);
        assert_eq!(encoder.disparity(), scalar.disparity());
    }
}

/// The comma aligner over an arbitrary bit stream. Byte 0 picks the push size (1..=64 bits) and byte 1
/// the mode. Mode bit 0 clear: the rest is raw bits; checks: no panic, bounded output, nothing before
/// alignment, and the same groups whatever the push size. Mode bit 0 set: the rest is `[garbage length,
/// garbage byte, symbols...]`; the symbols (bytes `F0h..FBh` stand for the twelve K symbols) are sent after
/// a COM, behind up to 14 garbage bits and inverted if mode bit 1 is set; check: the aligner delivers the
/// sent code groups exactly from the COM on.
pub fn align_8b10b(data: &[u8]) {
    let [push_size, mode, rest @ ..] = data else {
        return;
    };
    let push_size = u32::from(*push_size % 64) + 1;
    if mode & 1 == 0 {
        let raw = &rest[..rest.len().min(4 * MAX_CODES)];
        let (groups, hash, aligner) = run_aligner(raw.iter().flat_map(|&b| byte_bits(b)), push_size, |_| {});
        let (groups_64, hash_64, aligner_64) =
            run_aligner(raw.iter().flat_map(|&b| byte_bits(b)), 64, |_| {});
        assert_eq!((groups, hash), (groups_64, hash_64));
        assert_eq!(aligner.realignments(), aligner_64.realignments());
        assert_eq!(aligner.dropped(), 0);
        // Every group starts at a comma or where the previous one ended, so there are at most as many as
        // whole groups in the stream plus one re-read per (re)alignment.
        let bits = 8 * raw.len() as u64;
        assert!(groups <= bits / 10 + u64::from(aligner.realignments()) + 1);
        assert!(groups == 0 || aligner.is_aligned());
        return;
    }

    let [garbage_len, garbage, symbol_bytes @ ..] = rest else {
        return;
    };
    let garbage_len = usize::from(garbage_len % 15);
    let garbage = u16::from(*garbage) * 0x0101;
    let inverted = mode & 2 != 0;
    let mut symbols = [Symbol::COM; MAX_CODES];
    let n = symbol_bytes.len().min(MAX_CODES - 1) + 1;
    for (s, &b) in symbols[1..n].iter_mut().zip(symbol_bytes) {
        *s = match control::ALL.get(usize::from(b.wrapping_sub(0xF0))) {
            Some(&k) => Symbol::Control(k),
            None => Symbol::Data(b),
        };
    }
    let mut sent = [0u16; MAX_CODES];
    Encoder::new()
        .encode_symbols(&symbols[..n], &mut sent[..n])
        .unwrap();
    let sent = &sent[..n];
    let invert = |bit: bool| bit != inverted;
    let stream = (0..garbage_len)
        .map(|i| garbage >> i & 1 == 1)
        .chain(sent.iter().flat_map(|&c| (0..10).map(move |i| c >> i & 1 == 1)))
        .map(invert);
    // Keep the last `n` groups delivered and check they are exactly what was sent.
    let mut last = [0u16; MAX_CODES];
    let mut delivered = 0usize;
    let (_, _, aligner) = run_aligner(stream, push_size, |code| {
        last[delivered % MAX_CODES] = code;
        delivered += 1;
    });
    assert!(
        delivered >= n && delivered <= n + 2,
        "{delivered} groups for {n} sent"
    );
    for (i, &code) in sent.iter().enumerate() {
        let expected = if inverted { !code & 0x3FF } else { code };
        assert_eq!(last[(delivered - n + i) % MAX_CODES], expected, "group {i}");
    }
    assert!(aligner.realignments() <= 2);
}

fn byte_bits(byte: u8) -> impl Iterator<Item = bool> {
    (0..8).map(move |i| byte >> i & 1 == 1)
}

/// Push `bits` into a new aligner `push_size` at a time, popping after each push. Returns how many groups
/// came out, a hash of them in order, and the aligner.
fn run_aligner(
    bits: impl Iterator<Item = bool>,
    push_size: u32,
    mut each: impl FnMut(u16),
) -> (u64, u64, CommaAligner) {
    let mut aligner = CommaAligner::new();
    let mut groups = 0u64;
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut word = 0u64;
    let mut count = 0;
    let mut drain = |aligner: &mut CommaAligner| {
        while let Some(code) = aligner.pop() {
            assert!(code <= 0x3FF);
            groups += 1;
            hash = (hash ^ u64::from(code)).wrapping_mul(0x100_0000_01b3);
            each(code);
        }
    };
    for bit in bits {
        word |= u64::from(bit) << count;
        count += 1;
        if count == push_size {
            aligner.push_bits(word, count);
            drain(&mut aligner);
            word = 0;
            count = 0;
        }
    }
    aligner.push_bits(word, count);
    drain(&mut aligner);
    (groups, hash, aligner)
}
