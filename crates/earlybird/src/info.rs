//! Info objects (MPI 4.1 §10): ordered (key, value) hints, the way the extensions and the
//! communicator calls take their options.
//!
//! Keys are at most [`MAX_INFO_KEY`] bytes and values at most [`MAX_INFO_VAL`] bytes; leading
//! and trailing white space of a key is not part of it. Keys keep the order in which they were
//! first set, which is the order of [`Info::nthkey`]. Info calls are local and return their
//! errors (`MPI_ERR_INFO_KEY`, `MPI_ERR_INFO_VALUE`, `MPI_ERR_INFO_NOKEY`, `MPI_ERR_ARG`),
//! each message naming the bad key or index.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};

/// MPI_MAX_INFO_KEY: longest key, in bytes.
pub const MAX_INFO_KEY: usize = 255;
/// MPI_MAX_INFO_VAL: longest value, in bytes.
pub const MAX_INFO_VAL: usize = 1024;

/// An MPI info object (MPI_Info).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    entries: Vec<(String, String)>,
}

fn check_key(key: &str) -> Result<&str> {
    let k = key.trim();
    if k.is_empty() {
        return Err(Error::new(
            ErrorClass::InfoKey,
            format!("info key {key:?} is empty"),
        ));
    }
    if k.len() > MAX_INFO_KEY {
        return Err(Error::new(
            ErrorClass::InfoKey,
            format!(
                "info key of {} bytes is longer than MPI_MAX_INFO_KEY ({MAX_INFO_KEY}): {:?}...",
                k.len(),
                &k[..k.floor_char_boundary(32)]
            ),
        ));
    }
    Ok(k)
}

impl Info {
    /// MPI_Info_create: an empty info object.
    pub fn new() -> Info {
        Info::default()
    }

    /// MPI_Info_set: set `key` to `value`, replacing an earlier value (its position stays).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let k = check_key(key)?;
        if value.len() > MAX_INFO_VAL {
            return Err(Error::new(
                ErrorClass::InfoValue,
                format!("value of info key {k:?} is {} bytes, longer than MPI_MAX_INFO_VAL ({MAX_INFO_VAL})", value.len()),
            ));
        }
        match self.entries.iter_mut().find(|(ek, _)| ek == k) {
            Some((_, v)) => *v = value.to_string(),
            None => self.entries.push((k.to_string(), value.to_string())),
        }
        Ok(())
    }

    /// MPI_Info_get (and MPI_Info_get_valuelen): the value of `key`, if set.
    pub fn get(&self, key: &str) -> Result<Option<&str>> {
        let k = check_key(key)?;
        Ok(self
            .entries
            .iter()
            .find(|(ek, _)| ek == k)
            .map(|(_, v)| v.as_str()))
    }

    /// MPI_Info_get_string: the value of `key` cut to fit a buffer of `buflen` bytes (one of
    /// which C reserves for the terminating NUL, so at most `buflen - 1` bytes, cut at a
    /// character boundary), and the buffer length the whole value needs (its length + 1).
    /// `None` if the key is not set.
    pub fn get_string(&self, key: &str, buflen: usize) -> Result<Option<(String, usize)>> {
        Ok(self.get(key)?.map(|v| {
            let room = buflen.saturating_sub(1).min(v.len());
            (v[..v.floor_char_boundary(room)].to_string(), v.len() + 1)
        }))
    }

    /// MPI_Info_delete: remove `key`; `MPI_ERR_INFO_NOKEY` if it is not set.
    pub fn delete(&mut self, key: &str) -> Result<()> {
        let k = check_key(key)?;
        match self.entries.iter().position(|(ek, _)| ek == k) {
            Some(i) => {
                self.entries.remove(i);
                Ok(())
            }
            None => Err(Error::new(
                ErrorClass::InfoNoKey,
                format!("info_delete: key {k:?} is not set"),
            )),
        }
    }

    /// MPI_Info_dup.
    pub fn dup(&self) -> Info {
        self.clone()
    }

    /// MPI_Info_get_nkeys.
    pub fn nkeys(&self) -> usize {
        self.entries.len()
    }

    /// MPI_Info_get_nthkey: the `n`-th key (0-based); `MPI_ERR_ARG` past the end.
    pub fn nthkey(&self, n: usize) -> Result<&str> {
        self.entries.get(n).map(|(k, _)| k.as_str()).ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!(
                    "info_get_nthkey: index {n} is past the last key (the info object has {} keys)",
                    self.nkeys()
                ),
            )
        })
    }

    /// The (key, value) pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// MPI_Info_free. Dropping the object does the same.
    pub fn free(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_delete_dup_nthkey() {
        let mut i = Info::new();
        i.set("  cb_nodes ", "4").unwrap();
        i.set("address_base_increment", "1024").unwrap();
        i.set("cb_nodes", "8").unwrap();
        assert_eq!(i.nkeys(), 2);
        assert_eq!(i.nthkey(0).unwrap(), "cb_nodes");
        assert_eq!(i.get("cb_nodes").unwrap(), Some("8"));
        assert_eq!(i.get("missing").unwrap(), None);
        assert_eq!(
            i.get_string("address_base_increment", 3).unwrap(),
            Some(("10".to_string(), 5))
        );
        assert_eq!(
            i.get_string("address_base_increment", 100).unwrap(),
            Some(("1024".to_string(), 5))
        );
        assert_eq!(
            i.get_string("address_base_increment", 0).unwrap(),
            Some((String::new(), 5))
        );
        let d = i.dup();
        i.delete("cb_nodes").unwrap();
        assert_eq!((i.nkeys(), d.nkeys()), (1, 2));
        assert_eq!(i.nthkey(0).unwrap(), "address_base_increment");
        assert_eq!(
            d.iter().collect::<Vec<_>>(),
            vec![("cb_nodes", "8"), ("address_base_increment", "1024")]
        );
    }

    #[test]
    fn multibyte_values_are_cut_at_character_boundaries() {
        let mut i = Info::new();
        i.set("k", "héllo").unwrap();
        assert_eq!(i.get_string("k", 3).unwrap(), Some(("h".to_string(), 7)));
    }

    #[test]
    fn bad_input_names_the_key_or_index() {
        let mut i = Info::new();
        let e = i.set("   ", "x").unwrap_err();
        assert_eq!(e.class(), ErrorClass::InfoKey);
        let e = i.set(&"k".repeat(300), "x").unwrap_err();
        assert!(
            e.class() == ErrorClass::InfoKey && e.detail().contains("300 bytes"),
            "{e}"
        );
        let e = i.set("big", &"v".repeat(2000)).unwrap_err();
        assert!(
            e.class() == ErrorClass::InfoValue && e.detail().contains("\"big\""),
            "{e}"
        );
        let e = i.delete("nothere").unwrap_err();
        assert!(
            e.class() == ErrorClass::InfoNoKey && e.detail().contains("nothere"),
            "{e}"
        );
        let e = i.nthkey(3).unwrap_err();
        assert!(
            e.class() == ErrorClass::Arg && e.detail().contains("index 3"),
            "{e}"
        );
    }
}
