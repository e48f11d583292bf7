//! MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size in "external32"
//! (MPI 4.1 §5.2.3, §15.5.2): big-endian bytes of the representation's sizes, checked
//! against hand-written encodings, and round trips through derived types. Local: no job.

use earlybird::{BasicType, Datatype, ErrorClass, Result};

fn pack_ext<T: earlybird::Equivalence>(t: &Datatype, buf: &[T], count: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; t.pack_external_size("external32", count)?];
    let mut pos = 0;
    t.pack_external("external32", buf, count, &mut out, &mut pos)?;
    assert_eq!(pos, out.len());
    Ok(out)
}

/// Integers and floats are big-endian at their external32 sizes; long is 4 bytes and
/// wchar_t 2, and a value they cannot hold is MPI_ERR_CONVERSION.
#[test]
fn encodings_of_basic_types() -> Result<()> {
    assert_eq!(
        pack_ext(&Datatype::of::<i32>(), &[0x0102_0304i32, -2], 2)?,
        [1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe]
    );
    assert_eq!(
        pack_ext(&Datatype::of::<f64>(), &[1.0f64], 1)?,
        1.0f64.to_be_bytes()
    );
    assert_eq!(
        pack_ext(&Datatype::of::<u16>(), &[0xabcdu16], 1)?,
        [0xab, 0xcd]
    );
    let long = Datatype::basic(BasicType::Long);
    assert_eq!(long.pack_external_size("external32", 3)?, 12);
    assert_eq!(
        pack_ext(&long, &[-5i64, 7], 2)?,
        [0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 7]
    );
    let e = pack_ext(&long, &[1i64 << 40], 1).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Conversion, "{e}");
    let wchar = Datatype::basic(BasicType::Wchar);
    assert_eq!(
        pack_ext(&wchar, &[0x41i32, 0x20ac], 2)?,
        [0, 0x41, 0x20, 0xac]
    );
    let e = pack_ext(&wchar, &[0x1f600i32], 1).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Conversion, "{e}");
    let c = Datatype::basic(BasicType::CFloatComplex);
    let mut want = 1.5f32.to_be_bytes().to_vec();
    want.extend((-2.0f32).to_be_bytes());
    assert_eq!(pack_ext(&c, &[[1.5f32, -2.0]], 1)?, want);
    Ok(())
}

/// long double: x87 80-bit in memory, IEEE binary128 in external32 (1.0, -3.5, the
/// smallest normal, infinity), and back.
#[test]
fn long_double_is_binary128() -> Result<()> {
    let t = Datatype::basic(BasicType::LongDouble);
    let x87 = |mant: u64, se: u16| {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&mant.to_le_bytes());
        b[8..10].copy_from_slice(&se.to_le_bytes());
        b
    };
    let cases: [([u8; 16], u128); 4] = [
        (x87(1 << 63, 0x3fff), 0x3fff << 112),
        // -3.5 = -1.75 * 2^1
        (
            x87(0xe000_0000_0000_0000, 0xc000),
            (0xc000u128 << 112) | (0xc000u128 << 96),
        ),
        (x87(1 << 63, 0x0001), 0x0001 << 112),
        (x87(1 << 63, 0x7fff), 0x7fff << 112),
    ];
    for (mem, q) in cases {
        let out = pack_ext(&t, &mem, 1)?;
        assert_eq!(out, q.to_be_bytes(), "{mem:?}");
        let mut back = [0u8; 16];
        let mut pos = 0;
        t.unpack_external("external32", &out, &mut pos, &mut back, 1)?;
        assert_eq!(back[..10], mem[..10], "round trip of {mem:?}");
    }
    Ok(())
}

/// A struct with padding and mixed members (double, short, long, float complex) packs to
/// the sum of the external sizes and unpacks to the same values; positions advance.
#[test]
fn derived_types_round_trip() -> Result<()> {
    let t = Datatype::create_struct(
        &[1, 2, 1, 1],
        &[0, 8, 16, 24],
        &[
            Datatype::of::<f64>(),
            Datatype::of::<i16>(),
            Datatype::basic(BasicType::Long),
            Datatype::basic(BasicType::CFloatComplex),
        ],
    )?;
    t.commit()?;
    // 8 + 2*2 + 4 + 8 external bytes per element.
    assert_eq!(t.pack_external_size("external32", 3)?, 72);
    let mut mem = vec![0u8; 32 * 3];
    for k in 0..3usize {
        let e = &mut mem[32 * k..32 * (k + 1)];
        e[..8].copy_from_slice(&(k as f64 + 0.25).to_ne_bytes());
        e[8..10].copy_from_slice(&(-(k as i16) - 1).to_ne_bytes());
        e[10..12].copy_from_slice(&(300 + k as i16).to_ne_bytes());
        e[16..24].copy_from_slice(&(-(k as i64) * 1000).to_ne_bytes());
        e[24..28].copy_from_slice(&(k as f32).to_ne_bytes());
        e[28..32].copy_from_slice(&(0.5f32).to_ne_bytes());
    }
    let mut out = vec![0u8; 4 + 72];
    let mut pos = 4;
    t.pack_external("external32", &mem, 3, &mut out, &mut pos)?;
    assert_eq!(pos, 76);
    assert_eq!(out[4..12], 0.25f64.to_be_bytes());
    assert_eq!(out[12..14], (-1i16).to_be_bytes());
    let mut back = vec![0u8; 32 * 3];
    let mut pos = 4;
    t.unpack_external("external32", &out, &mut pos, &mut back, 3)?;
    assert_eq!(pos, 76);
    for k in 0..3 {
        let (a, b) = (&mem[32 * k..32 * (k + 1)], &back[32 * k..32 * (k + 1)]);
        assert_eq!(a[..12], b[..12], "element {k}: double and shorts");
        assert_eq!(a[16..32], b[16..32], "element {k}: long and complex");
    }
    // Too small an output buffer, an unknown representation.
    let mut small = vec![0u8; 10];
    let mut p = 0;
    let e = t
        .pack_external("external32", &mem, 3, &mut small, &mut p)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Truncate, "{e}");
    let e = t.pack_external_size("native", 1).unwrap_err();
    assert_eq!(e.class(), ErrorClass::UnsupportedDatarep, "{e}");
    Ok(())
}
