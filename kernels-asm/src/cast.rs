//! Views of byte buffers as slices of plain numbers (`f32`, `u16`, `i8`),
//! checked for size and alignment. Every bit pattern is a valid value of
//! these types, so the only conditions are alignment and length.

/// `bytes` as `&[f32]`, when its address is 4-aligned and its length a
/// multiple of 4.
pub fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    if bytes.as_ptr().align_offset(4) != 0 || !bytes.len().is_multiple_of(4) {
        return None;
    }
    // SAFETY: the pointer is 4-aligned (checked), the length in bytes is a
    // multiple of 4 (checked), the memory is borrowed for the same lifetime,
    // and every 4-byte pattern is a valid f32.
    Some(unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), bytes.len() / 4) })
}

/// `bytes` as `&mut [f32]` (same conditions as [`as_f32`]).
pub fn as_f32_mut(bytes: &mut [u8]) -> Option<&mut [f32]> {
    if bytes.as_ptr().align_offset(4) != 0 || !bytes.len().is_multiple_of(4) {
        return None;
    }
    // SAFETY: as in `as_f32`; the mutable borrow is exclusive and moves into
    // the result, and any f32 written is a valid byte pattern.
    Some(unsafe {
        core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<f32>(), bytes.len() / 4)
    })
}

/// `bytes` as `&mut [u16]`, when 2-aligned with an even length.
pub fn as_u16_mut(bytes: &mut [u8]) -> Option<&mut [u16]> {
    if bytes.as_ptr().align_offset(2) != 0 || !bytes.len().is_multiple_of(2) {
        return None;
    }
    // SAFETY: 2-aligned and an even length (checked); every pattern is a u16.
    Some(unsafe {
        core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u16>(), bytes.len() / 2)
    })
}

/// `bytes` as `&mut [i16]`, when 2-aligned with an even length.
pub fn as_i16_mut(bytes: &mut [u8]) -> Option<&mut [i16]> {
    if bytes.as_ptr().align_offset(2) != 0 || !bytes.len().is_multiple_of(2) {
        return None;
    }
    // SAFETY: 2-aligned and an even length (checked); every pattern is an i16.
    Some(unsafe {
        core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<i16>(), bytes.len() / 2)
    })
}

/// `bytes` as `&mut [i8]` (always possible).
pub fn as_i8_mut(bytes: &mut [u8]) -> &mut [i8] {
    // SAFETY: i8 and u8 have the same size and alignment and every pattern
    // is valid for both.
    unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<i8>(), bytes.len()) }
}

/// `bytes` as `&mut [u32]`, when 4-aligned with a length multiple of 4.
pub fn as_u32_mut(bytes: &mut [u8]) -> Option<&mut [u32]> {
    if bytes.as_ptr().align_offset(4) != 0 || !bytes.len().is_multiple_of(4) {
        return None;
    }
    // SAFETY: 4-aligned, length a multiple of 4 (checked); every pattern is a u32.
    Some(unsafe {
        core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u32>(), bytes.len() / 4)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_length_are_checked() {
        let mut buf = [0u32; 4];
        let bytes: &mut [u8] = {
            let p = buf.as_mut_ptr().cast::<u8>();
            // SAFETY: test-only view of a u32 array as its 16 bytes.
            unsafe { core::slice::from_raw_parts_mut(p, 16) }
        };
        assert!(as_f32(&bytes[1..5]).is_none());
        assert!(as_f32(&bytes[..6]).is_none());
        assert_eq!(as_f32_mut(&mut bytes[4..12]).map(|s| s.len()), Some(2));
        assert!(as_u16_mut(&mut bytes[1..3]).is_none());
        assert_eq!(as_i8_mut(&mut bytes[3..6]).len(), 3);
    }
}
