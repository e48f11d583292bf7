use super::*;

fn d() -> Datatype {
    Datatype::of::<f64>()
}

#[test]
fn basic_types_have_their_sizes_and_names() {
    let t = Datatype::basic(BasicType::Int);
    assert_eq!(
        (t.size(), t.get_extent(), t.name()),
        (4, (0, 4), "MPI_INT".into())
    );
    assert!(t.is_predefined() && t.is_committed());
    let p = Datatype::basic(BasicType::DoubleInt);
    assert_eq!((p.size(), p.extent(), p.block_count()), (12, 16, 1));
    assert_eq!(p.elements_in(18), None);
    assert_eq!(p.elements_in(20), Some(3));
    assert_eq!(p.elements_in(24), Some(4));
    assert_eq!(
        Datatype::basic(BasicType::Double)
            .free()
            .unwrap_err()
            .class(),
        ErrorClass::Type
    );
}

#[test]
fn vector_extent_and_blocks() {
    // 3 blocks of 2 doubles, stride 5: extent (2*5 + 2) * 8.
    let v = Datatype::vector(3, 2, 5, &d()).unwrap();
    assert_eq!(
        (v.size(), v.get_extent(), v.block_count()),
        (48, (0, 96), 3)
    );
    assert!(!v.is_committed());
    assert_eq!(v.get_true_extent(), (0, 96));
    // Negative stride: blocks at 0, -40, -80 bytes.
    let n = Datatype::vector(3, 2, -5, &d()).unwrap();
    assert_eq!(n.get_extent(), (-80, 96));
    // A stride equal to the block length is contiguous and merges.
    let c = Datatype::vector(4, 2, 2, &d()).unwrap();
    assert_eq!(c.block_count(), 1);
    assert!(c.is_contiguous_run(3));
}

#[test]
fn struct_pads_and_resized_sets_extent() {
    let s = Datatype::create_struct(&[1, 1], &[0, 8], &[d(), Datatype::of::<i32>()]).unwrap();
    assert_eq!(
        (s.size(), s.extent(), s.get_true_extent()),
        (12, 16, (0, 12))
    );
    let r = Datatype::create_resized(&s, -4, 40).unwrap();
    assert_eq!(
        (r.size(), r.get_extent(), r.get_true_extent()),
        (12, (-4, 40), (0, 12))
    );
    let c = Datatype::contiguous(2, &r).unwrap();
    assert_eq!(c.get_extent(), (-4, 80));
    assert_eq!(c.get_true_extent(), (0, 52));
    assert_eq!(c.elements_in(12 + 8), Some(3));
    assert_eq!(c.elements_in(12 + 6), None);
}

#[test]
fn subarray_c_and_fortran_orders() {
    // 4x5 array, 2x3 block at (1,1), C order: rows of 3 at 6, 11 elements.
    let t = Datatype::create_subarray(&[4, 5], &[2, 3], &[1, 1], Order::C, &d()).unwrap();
    assert_eq!(
        (t.size(), t.get_extent(), t.block_count()),
        (48, (0, 160), 2)
    );
    assert_eq!(t.get_true_extent(), (48, 64));
    let f = Datatype::create_subarray(&[5, 4], &[3, 2], &[1, 1], Order::Fortran, &d()).unwrap();
    assert_eq!(f.0.blocks[..], t.0.blocks[..]);
    let bad = Datatype::create_subarray(&[4], &[3], &[2], Order::C, &d()).unwrap_err();
    assert_eq!(bad.class(), ErrorClass::Arg);
}

#[test]
fn indexed_and_mismatched_lengths() {
    let t = Datatype::indexed(&[1, 2], &[4, 0], &d()).unwrap();
    assert_eq!(&t.0.blocks[..], &[(32, 8), (0, 16)]);
    assert_eq!(t.get_extent(), (0, 40));
    let e = Datatype::indexed(&[1], &[4, 0], &d()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg);
    assert!(e
        .to_string()
        .contains("blocklengths has 1 entries but displacements has 2"));
}

#[test]
fn pack_unpack_round_trip_and_errors() {
    let src: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let v = Datatype::vector(3, 1, 4, &d()).unwrap();
    let mut out = [0u8; 24];
    let mut pos = 0;
    assert_eq!(
        v.pack(&src, 1, &mut out, &mut pos).unwrap_err().class(),
        ErrorClass::Type
    );
    v.commit().unwrap();
    v.pack(&src, 1, &mut out, &mut pos).unwrap();
    assert_eq!(pos, 24);
    let got: Vec<f64> = out
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![0.0, 4.0, 8.0]);
    let mut back = vec![-1.0; 12];
    let mut p2 = 0;
    v.unpack(&out, &mut p2, &mut back, 1).unwrap();
    assert_eq!((back[0], back[4], back[8], back[1]), (0.0, 4.0, 8.0, -1.0));
    // No room, and a view reaching past the slice.
    let mut pos = 8;
    assert_eq!(
        v.pack(&src, 1, &mut out, &mut pos).unwrap_err().class(),
        ErrorClass::Truncate
    );
    assert_eq!(
        v.pack(&src[..8], 1, &mut out, &mut 0).unwrap_err().class(),
        ErrorClass::Buffer
    );
    assert_eq!(v.pack_size(5).unwrap(), 120);
}

#[test]
fn explicit_bounds_decide_a_struct_without_padding() {
    // A double resized to extent 12: a struct of it keeps extent 12 (the markers decide),
    // where a plain double member would be padded to 16 with the int.
    let r = Datatype::create_resized(&d(), 0, 12).unwrap();
    let s = Datatype::create_struct(&[1, 1], &[0, 8], &[r, Datatype::of::<i32>()]).unwrap();
    assert_eq!(s.get_extent(), (0, 12));
    let n = Datatype::create_struct(&[1, 1], &[0, 8], &[d(), Datatype::of::<i32>()]).unwrap();
    assert_eq!(n.get_extent(), (0, 16));
    // The markers of a vector of resized types follow the copies.
    let v = Datatype::contiguous(3, &Datatype::create_resized(&d(), -4, 16).unwrap()).unwrap();
    assert_eq!(v.get_extent(), (-4, 48));
}

#[test]
fn huge_contiguous_types_stay_one_block() {
    let t = Datatype::contiguous(100_000_000, &d()).unwrap();
    assert_eq!(
        (t.size(), t.block_count(), t.elements_in(800)),
        (800_000_000, 1, Some(100))
    );
    let a = Datatype::of::<[u8; 1 << 27]>();
    assert_eq!((a.size(), a.block_count()), (1 << 27, 1));
    // A huge strided type is refused with a message, not built.
    let e = Datatype::vector(1 << 25, 1, 2, &d()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg);
}

#[test]
fn unsigned_bytes_are_never_signature_checked() {
    assert_eq!(<u8 as Equivalence>::SIG, Sig::MIXED);
    assert_eq!(Datatype::of::<u8>().sig_code(), Sig::MIXED);
    assert_ne!(Datatype::of::<i8>().sig_code(), Sig::MIXED);
    assert_eq!(BasicType::CFloatComplex.align(), 4);
    assert_eq!(BasicType::LongDouble.align(), 16);
}
