//! `#[derive(Equivalence)]`: a `#[repr(C)]` struct as an MPI struct datatype.
//!
//! For each field the macro takes the field's own datatype (`<F as Equivalence>::datatype()`)
//! at `offset_of!(S, field)`, builds them into one `MPI_Type_create_struct`, resizes it to
//! `size_of::<S>()` (so arrays of `S` stride by the Rust layout) and commits it, once per
//! thread. Padding is never part of the datatype, so a struct with padding is sent field by
//! field; a struct without padding is still sent as its bytes.
//!
//! ```ignore
//! #[derive(Clone, Copy, earlybird::Equivalence)]
//! #[repr(C)]
//! struct Particle { pos: [f64; 3], id: i32 }   // 4 bytes of tail padding
//! world.send(&particles[..], 1, 0)?;
//! ```
//!
//! The generated `unsafe impl Plain` is sound because the datatype covers exactly the
//! fields, each of a type that is itself `Equivalence` (hence `Plain`): those bytes are
//! initialised in every value, and any bytes written there make valid field values.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Index, Member};

#[proc_macro_derive(Equivalence)]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[derive(Equivalence)] does not support generic structs",
        ));
    }
    let repr_c = input.attrs.iter().any(|a| {
        a.path().is_ident("repr")
            && a.parse_nested_meta(|m| {
                if m.path.is_ident("C") {
                    Ok(())
                } else {
                    Err(m.error("other repr"))
                }
            })
            .is_ok()
    });
    if !repr_c {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(Equivalence)] needs #[repr(C)], so that every rank lays the struct out the same way",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(Equivalence)] works on structs only",
        ));
    };
    let (members, types): (Vec<Member>, Vec<&syn::Type>) = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| (Member::Named(f.ident.clone().expect("named")), &f.ty))
            .unzip(),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| (Member::Unnamed(Index::from(i)), &f.ty))
            .unzip(),
        Fields::Unit => (vec![], vec![]),
    };
    let n = types.len();
    Ok(quote! {
        // SAFETY: the datatype below is made of the fields only, each an `Equivalence`
        // (so `Plain`) type at its own offset: its bytes are initialised in every value and
        // any bytes written there are valid. The struct is gapless exactly when its fields
        // are and their sizes add up to its size (no padding).
        unsafe impl ::earlybird::Plain for #name {
            const GAPLESS: bool = true
                #(&& <#types as ::earlybird::Plain>::GAPLESS)*
                && (0 #(+ ::core::mem::size_of::<#types>())*) == ::core::mem::size_of::<#name>();
        }

        impl ::earlybird::Equivalence for #name {
            const SIG: ::earlybird::Sig = {
                let s: &[::earlybird::Sig] = &[#(<#types as ::earlybird::Equivalence>::SIG),*];
                let mut acc = if s.is_empty() { ::earlybird::Sig::MIXED } else { s[0] };
                let mut i = 1;
                while i < #n {
                    acc = acc.join(s[i]);
                    i += 1;
                }
                acc
            };

            fn datatype() -> ::earlybird::Datatype {
                ::std::thread_local! {
                    static TYPE: ::earlybird::Datatype = {
                        let s = ::earlybird::Datatype::derived_struct(
                            &[#(::core::mem::offset_of!(#name, #members) as isize),*],
                            &[#(<#types as ::earlybird::Equivalence>::datatype()),*],
                            ::core::mem::size_of::<#name>() as isize,
                        )
                        .expect("the fields of a #[repr(C)] struct make a valid struct datatype");
                        s.set_name(::core::stringify!(#name));
                        s.commit().expect("commit");
                        s
                    };
                }
                TYPE.with(|t| t.clone())
            }
        }
    })
}
