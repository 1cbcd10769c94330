"""A reader of celer-preprocess's output, stdlib only: CELERRC1 record files and the
output directory's manifest.json. Written from the byte layout in
actors/preprocess/README.md ("Record files", "Byte layout (version 1)") and that README's
"The output directory" (the manifest), not from the C++ code.

    python3 bench/peers/celerrc1.py --self-test
    python3 bench/peers/celerrc1.py PATH [--dump N]   (a .rec file, or a directory with a
                                                      manifest.json: checks everything)

    from celerrc1 import RecordFile, read_output
    with RecordFile("out/shard-00000.rec") as f:     # checks the frame (header, trailer, index)
        key, label, payload = f.record(3)             # checks record 3's sizes and CRC
        f.verify()                                    # every record, then the whole-file CRC
    m = read_manifest("out")                          # the manifest's fields, checked
    for shard, key, label, payload in read_output("out"):   # every shard verified, in the
        ...                                           # manifest's order; key checksum at the end

Every error is a RecordFileError (a ValueError) naming the file and, for damage, the byte
offset, as the README's messages do. `RecordFile.record(i)` gives the payload as a
memoryview into the mapping (valid while the file is open); the iterators copy it to bytes.
The self-test writes files with a small writer that follows the same table (`encode`,
`write_output`), reads them back, and flips bytes to see each damage detected.
"""

import json
import mmap
import os
import struct
import sys
import zlib

MAGIC = b"CELERRC1"
END_MAGIC = b"CELEREND"
VERSION = 1
TRAILER = 32
KEY_SEED = 0x6B6579  # the manifest's key_checksum: sum of XXH64(key, this seed) mod 2^64
MASK64 = (1 << 64) - 1


class RecordFileError(ValueError):
    def __init__(self, path, what, offset=None):
        self.path, self.what, self.offset = path, what, offset
        at = "" if offset is None else f" at byte offset {offset}"
        super().__init__(f"{path}: {what}{at}")


def align8(n):
    return (n + 7) & ~7


def crc32(data, start=0):
    """zlib's crc32 of `data` from `start`, in 64 MiB pieces (bounds any one call)."""
    mv = memoryview(data)
    c = start
    for i in range(0, len(mv), 1 << 26):
        c = zlib.crc32(mv[i:i + (1 << 26)], c)
    return c & 0xFFFFFFFF


def _is_zero(mv):
    return not any(mv)


class RecordFile:
    """One CELERRC1 file, mapped read-only. Opening checks, in the README's order: magic,
    version, size against header + trailer, header CRC, end magic, trailer against the size,
    index CRC, index entries. Records are checked when read."""

    def __init__(self, path):
        self.path = str(path)
        self._map = None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise RecordFileError(self.path, "record file does not exist") from None
        try:
            self.size = os.fstat(fd).st_size
            if self.size > 0:
                self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._mv = memoryview(self._map) if self._map is not None else memoryview(b"")
        try:
            self._check_frame()
        except BaseException:
            self.close()
            raise

    # -- the frame ----------------------------------------------------------------------
    def _err(self, what, offset=None):
        return RecordFileError(self.path, what, offset)

    def _u32(self, o):
        return struct.unpack_from("<I", self._mv, o)[0]

    def _u64(self, o):
        return struct.unpack_from("<Q", self._mv, o)[0]

    def _check_frame(self):
        mv, size = self._mv, self.size
        head = bytes(mv[:8])
        if head != MAGIC[:len(head)]:
            raise self._err('not a record file: bad magic (expected "CELERRC1")', 0)
        if size < 16:
            raise self._err(f"truncated: the file ends inside the header ({size} bytes)", size)
        version = self._u32(8)
        if version != VERSION:
            raise self._err(f"record file version {version}; this reader reads version 1", 8)
        schema_size = self._u32(12)
        h = align8(16 + schema_size)
        self.header_end = h
        if h + 8 + TRAILER > size:
            if size >= TRAILER and bytes(mv[size - 8:]) == END_MAGIC:
                raise self._err(f"header damaged: a schema of {schema_size} bytes runs past "
                                f"the end of the file", 12)
            raise self._err(f"truncated: the file ends inside the header or before header + "
                            f"trailer ({size} bytes)", size)
        stored, computed = self._u32(h), crc32(mv[:h])
        if stored != computed:
            raise self._err(f"header checksum mismatch (stored {stored:#010x}, computed "
                            f"{computed:#010x})", h)
        if not _is_zero(mv[16 + schema_size:h]):
            raise self._err("header damaged: the schema's padding is not zero", 16 + schema_size)
        if self._u32(h + 4) != 0:
            raise self._err("header damaged: the reserved field is not 0", h + 4)
        self.schema_bytes = bytes(mv[16:16 + schema_size])
        self.first_record = h + 8

        if bytes(mv[size - 8:]) != END_MAGIC:
            raise self._err('truncated or never finished: no "CELEREND" at the end', size - 8)
        t = size - TRAILER
        n, i = self._u64(t), self._u64(t + 8)
        if n > size or i < self.first_record or i % 8 or i + 8 * n != t:
            raise self._err(f"trailer inconsistent with the file's size (count {n}, index "
                            f"offset {i}, size {size})", t)
        if n == 0 and i != self.first_record:
            raise self._err(f"trailer inconsistent with the file's size (no records, but the "
                            f"index is at {i}, not {self.first_record})", t)
        stored, computed = self._u32(t + 16), crc32(mv[i:t])
        if stored != computed:
            raise self._err(f"index checksum mismatch (stored {stored:#010x}, computed "
                            f"{computed:#010x})", i)
        self.count, self.index_offset, self.trailer_offset = n, i, t
        offsets = struct.unpack_from(f"<{n}Q", mv, i) if n else ()
        prev = None
        for k, o in enumerate(offsets):
            # record 0 at H+8; each 8-aligned, after the one before, and room for its
            # 20-byte fixed part (24 with padding) before the index
            bad = (o % 8 or o + 24 > i or (o <= prev if prev is not None else
                                            o != self.first_record))
            if bad:
                raise self._err(f"index entry {k} ({o}) is out of order or out of range",
                                i + 8 * k)
            prev = o
        self.offsets = offsets

    # -- records ------------------------------------------------------------------------
    @property
    def schema(self):
        return self.schema_bytes.decode("utf-8", errors="replace")

    def __len__(self):
        return self.count

    def record(self, k):
        """(key: bytes, label: int, payload: memoryview) of record k, its sizes and CRC
        checked. The memoryview points into the mapping."""
        if not 0 <= k < self.count:
            raise IndexError(f"{self.path}: record {k} of {self.count}")
        mv = self._mv
        o = self.offsets[k]
        end = self.offsets[k + 1] if k + 1 < self.count else self.index_offset
        key_size, payload_size = self._u32(o + 4), self._u64(o + 8)
        p = o + align8(20 + key_size)
        if p + align8(payload_size) != end:
            raise self._err(f"record {k}: key of {key_size} and payload of {payload_size} "
                            f"bytes do not fill its slot of {end - o} bytes", o)
        stored, computed = self._u32(o), crc32(mv[o + 4:end])
        if stored != computed:
            raise self._err(f"checksum mismatch in record {k} (stored {stored:#010x}, "
                            f"computed {computed:#010x})", o)
        if not _is_zero(mv[o + 20 + key_size:p]) or not _is_zero(mv[p + payload_size:end]):
            raise self._err(f"record {k}: padding is not zero", o)
        label = struct.unpack_from("<i", mv, o + 16)[0]
        return bytes(mv[o + 20:o + 20 + key_size]), label, mv[p:p + payload_size]

    def __iter__(self):
        """(key, label, payload as bytes) of each record in file order."""
        for k in range(self.count):
            key, label, payload = self.record(k)
            yield key, label, bytes(payload)

    def verify(self):
        """Every record, then the whole-file CRC (of bytes [0, T+20))."""
        for k in range(self.count):
            self.record(k)
        t = self.trailer_offset
        stored, computed = self._u32(t + 20), crc32(self._mv[:t + 20])
        if stored != computed:
            raise self._err(f"file checksum mismatch (stored {stored:#010x}, computed "
                            f"{computed:#010x})", t + 20)

    def close(self):
        if self._map is not None:
            self._mv.release()
            try:
                self._map.close()
            except BufferError:  # a caller still holds a payload view: left to the GC
                pass
            self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_records(path, verify=True):
    """(key: bytes, label: int, payload: bytes) per record of one file; with verify, the
    whole-file CRC is checked first (a full read)."""
    with RecordFile(path) as f:
        if verify:
            f.verify()
        yield from f


# -- the output directory ----------------------------------------------------------------
def _is_hex16(s):
    return isinstance(s, str) and len(s) == 16 and all(c in "0123456789abcdef" for c in s)


def _schema_payload_bytes(schema):
    """Bytes of a fixed-size schema's payload ("f32:8x8": 256); 0 for any size."""
    if schema in ("u32:tokens", "text"):
        return 0, []
    kind, _, dims = schema.partition(":")
    if kind not in ("f32", "u8") or not dims:
        raise ValueError(f"an unknown schema {schema!r}")
    shape = []
    for d in dims.split("x"):
        if not d.isdigit() or int(d) < 1:
            raise ValueError(f"schema {schema!r}: the dimension {d!r} is not a positive integer")
        shape.append(int(d))
    n = 4 if kind == "f32" else 1
    for d in shape:
        n *= d
    return n, shape


def read_manifest(d):
    """manifest.json of output directory `d` as a dict, its fields checked."""
    path = os.path.join(d, "manifest.json")
    if not os.path.isfile(path):
        raise RecordFileError(path, "does not exist (not an output directory, or an "
                                    "unfinished one: the manifest is written last)")
    try:
        with open(path, "rb") as f:
            m = json.loads(f.read())
    except ValueError as e:
        raise RecordFileError(path, f"is not valid JSON: {e}") from None

    def bad(field, what):
        return RecordFileError(path, f"field '{field}' {what}")

    def need(obj, field, types, name):
        if field not in obj:
            raise bad(name, "is missing")
        v = obj[field]
        if not isinstance(v, types) or isinstance(v, bool):
            raise bad(name, f"has the wrong type: {v!r}")
        return v

    if not isinstance(m, dict):
        raise RecordFileError(path, "a manifest is a JSON object")
    if need(m, "format", str, "format") != "CELERRC1":
        raise bad("format", f"is {m['format']!r}, not \"CELERRC1\"")
    if need(m, "version", int, "version") != 1:
        raise bad("version", f"is {m['version']}; this reader reads version 1")
    schema = need(m, "schema", str, "schema")
    try:
        m["payload_bytes"], shape = _schema_payload_bytes(schema)
    except ValueError as e:
        raise bad("schema", str(e)) from None
    if "sample_shape" in m and m["sample_shape"] != shape:
        raise bad("sample_shape", f"is {m['sample_shape']}, the schema says {shape}")
    if need(m, "classes", int, "classes") < 0:
        raise bad("classes", "is negative")
    names = m.get("label_names", [])
    if names and len(names) != m["classes"]:
        raise bad("label_names", f"holds {len(names)} names for {m['classes']} classes")
    items = need(m, "items", int, "items")
    for field in ("key_checksum", "config_hash"):
        if not _is_hex16(need(m, field, str, field)):
            raise bad(field, f"is {m[field]!r}: not 16 lower-case hex digits")
    shards = need(m, "shards", list, "shards")
    seen, total = set(), 0
    for k, s in enumerate(shards):
        name = f"shards[{k}]"
        if not isinstance(s, dict):
            raise bad(name, f"is not an object: {s!r}")
        file = need(s, "file", str, name + ".file")
        parts = file.replace("\\", "/").split("/")
        if not file or os.path.isabs(file) or ".." in parts:
            raise bad(name + ".file", f"is {file!r}: not a file inside the directory")
        if os.path.normpath(file) in seen:
            raise bad(name + ".file", f"is {file!r}, listed twice")
        seen.add(os.path.normpath(file))
        for field in ("records", "bytes"):
            if need(s, field, int, f"{name}.{field}") < 0:
                raise bad(f"{name}.{field}", "is negative")
        total += s["records"]
    if total != items:
        raise bad("items", f"is {items} but the shards' records add up to {total}")
    return m


def read_output(d, verify=True, check_keys=True):
    """(shard file name, key, label, payload bytes) for every record of output directory
    `d`, shards in the manifest's order. Checks each shard's schema, record count and size
    against the manifest, (with verify) every record's and the file's CRC before its records
    are yielded, each payload's size against the schema, each label against [0, classes)
    when classes > 0, and (with check_keys) the key checksum once all are read."""
    m = read_manifest(d)
    total = 0
    for s in m["shards"]:
        path = os.path.join(d, s["file"])
        with RecordFile(path) as f:
            if f.schema_bytes != m["schema"].encode():
                raise RecordFileError(path, f"schema {f.schema!r}, the manifest says "
                                            f"{m['schema']!r}")
            if f.count != s["records"] or f.size != s["bytes"]:
                raise RecordFileError(path, f"{f.count} records, {f.size} bytes; the manifest "
                                            f"says {s['records']}, {s['bytes']}")
            if verify:
                f.verify()
            for k, (key, label, payload) in enumerate(f):
                if m["payload_bytes"] and len(payload) != m["payload_bytes"]:
                    raise RecordFileError(path, f"record {k}: a payload of {len(payload)} "
                                                f"bytes; {m['schema']} needs {m['payload_bytes']}")
                if m["classes"] > 0 and not 0 <= label < m["classes"]:
                    raise RecordFileError(path, f"record {k}: label {label} outside [0, "
                                                f"{m['classes']})")
                if check_keys:
                    total = (total + xxh64(key, KEY_SEED)) & MASK64
                yield s["file"], key, label, payload
    if check_keys and f"{total:016x}" != m["key_checksum"]:
        raise RecordFileError(os.path.join(d, "manifest.json"),
                              f"key checksum {m['key_checksum']}, recomputed over the records "
                              f"{total:016x}")


def key_checksum(keys):
    """The manifest's key_checksum of an iterable of keys (bytes or str)."""
    total = 0
    for k in keys:
        total += xxh64(k.encode() if isinstance(k, str) else k, KEY_SEED)
    return f"{total & MASK64:016x}"


# -- XXH64 (xxHash spec 0.1.1), for the key checksum; the xxhash package when present ----
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & MASK64


def _round(acc, lane):
    return _rotl((acc + lane * _P2) & MASK64, 31) * _P1 & MASK64


def xxh64_py(data, seed=0):
    data = bytes(data)
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & MASK64, (seed + _P2) & MASK64, seed, (seed - _P1) & MASK64]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [_round(a, b) for a, b in zip(v, lanes)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & MASK64
        for a in v:
            h = ((h ^ _round(0, a)) * _P1 + _P4) & MASK64
    else:
        h = (seed + _P5) & MASK64
    h = (h + n) & MASK64
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & MASK64
        i += 8
    if i + 4 <= n:
        h ^= struct.unpack_from("<I", data, i)[0] * _P1 & MASK64
        h = (_rotl(h, 23) * _P2 + _P3) & MASK64
        i += 4
    while i < n:
        h ^= data[i] * _P5 & MASK64
        h = _rotl(h, 11) * _P1 & MASK64
        i += 1
    h ^= h >> 33
    h = h * _P2 & MASK64
    h ^= h >> 29
    h = h * _P3 & MASK64
    return h ^ (h >> 32)


try:
    from xxhash import xxh64_intdigest as _xxh64_c

    def xxh64(data, seed=0):
        return _xxh64_c(data, seed=seed)
except ImportError:  # stdlib only
    xxh64 = xxh64_py


# -- a writer from the README's table (the self-test's, and synthetic directories') -------
def encode(schema, records):
    """The bytes of a CELERRC1 file holding `records`, (key, label, payload) each."""
    schema = schema.encode() if isinstance(schema, str) else bytes(schema)
    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(schema)) + schema)
    out += bytes(align8(len(out)) - len(out))
    out += struct.pack("<II", zlib.crc32(out), 0)
    offsets = []
    for key, label, payload in records:
        key = key.encode() if isinstance(key, str) else bytes(key)
        payload = bytes(payload)
        body = struct.pack("<IQi", len(key), len(payload), label) + key
        body += bytes(align8(4 + len(body)) - 4 - len(body))
        body += payload + bytes(align8(len(payload)) - len(payload))
        offsets.append(len(out))
        out += struct.pack("<I", zlib.crc32(body)) + body
    index_at = len(out)
    index = struct.pack(f"<{len(offsets)}Q", *offsets)
    out += index
    out += struct.pack("<QQI", len(offsets), index_at, zlib.crc32(index))
    out += struct.pack("<I", zlib.crc32(out)) + END_MAGIC
    return bytes(out)


def write_output(d, schema, shards, classes, config_hash="0123456789abcdef", label_names=None):
    """An output directory: shard-NNNNN.rec per list of records in `shards`, then
    manifest.json (the README's fields). Returns the manifest."""
    os.makedirs(d, exist_ok=True)
    entries, keys = [], []
    for k, recs in enumerate(shards):
        name = f"shard-{k:05d}.rec"
        data = encode(schema, recs)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        entries.append({"file": name, "records": len(recs), "bytes": len(data)})
        keys.extend(r[0] for r in recs)
    _, shape = _schema_payload_bytes(schema)
    m = {"format": "CELERRC1", "version": 1, "schema": schema, "sample_shape": shape,
         "classes": classes, "label_names": label_names or [],
         "items": sum(e["records"] for e in entries), "key_checksum": key_checksum(keys),
         "config_hash": config_hash, "shards": entries}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    return m


# -- self-test ---------------------------------------------------------------------------
def self_test():
    import random
    import tempfile

    checks = 0

    def expect(cond, what):
        nonlocal checks
        checks += 1
        if not cond:
            raise AssertionError(what)

    def fails(data, words, name="t.rec", verify=True):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        try:
            with RecordFile(path) as r:
                if verify:
                    r.verify()
        except RecordFileError as e:
            expect(words in str(e), f"expected {words!r}, got: {e}")
            return str(e)
        raise AssertionError(f"no error; expected {words!r}")

    # XXH64: the spec's values, and the xxhash package's where installed
    expect(xxh64_py(b"") == 0xEF46DB3751D8E999, "xxh64('')")
    expect(xxh64_py(b"a") == 0xD24EC4F1A98C6E5B, "xxh64('a')")
    expect(xxh64_py(b"abc") == 0x44BC2CF5AD770999, "xxh64('abc')")
    rng = random.Random(5)
    if xxh64 is not xxh64_py:
        for n in list(range(70)) + [200, 1000]:
            b = rng.randbytes(n)
            s = rng.choice([0, KEY_SEED, rng.getrandbits(64)])
            expect(xxh64_py(b, s) == xxh64(b, s), f"xxh64_py vs xxhash, {n} bytes")

    # the README's worked examples: an empty "text" shard is 64 bytes; a record of key "ab",
    # label -2, payload "hello" is 32 bytes
    expect(zlib.crc32(b"123456789") == 0xCBF43926, "crc32 check value")
    empty = encode("text", [])
    expect(len(empty) == 64, f"empty shard is {len(empty)} bytes")
    one = encode("text", [(b"ab", -2, b"hello")])
    expect(len(one) == 64 + 32 + 8, f"one record file is {len(one)} bytes")
    expect(one[32:36] == struct.pack("<I", zlib.crc32(one[36:64])), "record CRC covers o+4..")
    expect(one[52:54] == b"ab" and one[56:61] == b"hello", "key at o+20, payload at o+24")

    tmp = tempfile.mkdtemp(prefix="celerrc1-selftest.")
    recs = [(f"k{i}".encode() * (i % 5), rng.randint(-3, 2**31 - 1) if i % 7 else -2**31,
             rng.randbytes(rng.choice([0, 1, 7, 8, 9, 1032, 3000])))
            for i in range(50)]
    recs[3] = (b"k3k3k3", 7, rng.randbytes(1032))
    data = encode("image:u8:28x28+label", recs)
    path = os.path.join(tmp, "good.rec")
    with open(path, "wb") as f:
        f.write(data)
    with RecordFile(path) as r:
        expect(r.schema == "image:u8:28x28+label" and len(r) == 50, "schema and count")
        r.verify()
        key, label, payload = r.record(41)
        expect((key, label, bytes(payload)) == recs[41], "record 41 by index")
        expect(all(o % 8 == 0 for o in r.offsets), "8-aligned records")
        del payload
    expect(list(iter_records(path)) == recs, "every record back, in order")
    with open(os.path.join(tmp, "e.rec"), "wb") as f:
        f.write(empty)
    expect(list(iter_records(os.path.join(tmp, "e.rec"))) == [], "empty shard")

    # damage: cut at every length; flip one byte in each part
    for n in range(len(one)):
        fails(one[:n], "truncated")
    for n in range(0, len(data), 97):
        fails(data[:n], "truncated")

    def flip(at, words, verify=True, bit=0x01):
        b = bytearray(data)
        b[at] ^= bit
        return fails(bytes(b), words, verify=verify)

    with RecordFile(path) as r:
        h, o0, o3 = r.header_end, r.offsets[0], r.offsets[3]
        i, t = r.index_offset, r.trailer_offset
        p3 = o3 + align8(20 + len(recs[3][0]))
    flip(0, "bad magic")
    flip(8, "version 0")
    flip(15, "header damaged", bit=0x80)             # schema size past a whole file's end
    flip(12, "header checksum")                      # schema size 21: still in the file
    flip(20, "header checksum")                      # a schema byte
    flip(h, "header checksum")                       # the stored CRC
    flip(h + 4, "reserved")
    flip(len(data) - 1, "CELEREND")
    flip(t, "trailer inconsistent")                  # count
    flip(t + 8, "trailer inconsistent", bit=0x08)    # index offset
    flip(t + 16, "index checksum")
    flip(i + 8 * 3, "index checksum")                # an index entry
    flip(o3, "checksum mismatch in record 3")        # record 3's CRC
    flip(o3 + 16, "checksum mismatch in record 3")   # its label
    flip(o3 + 4, "do not fill its slot", bit=0x08)   # its key size, 8 more
    msg = flip(p3 + 5, "checksum mismatch in record 3")   # a payload byte
    expect(f"at byte offset {o3}" in msg, "record damage names its offset")
    flip(t + 20, "file checksum mismatch")           # the file CRC: only verify() sees it
    b = bytearray(data)
    b[t + 20] ^= 1
    with open(os.path.join(tmp, "f.rec"), "wb") as f:
        f.write(b)
    with RecordFile(os.path.join(tmp, "f.rec")) as r:
        expect(r.record(49)[0] == recs[49][0], "open and record() do not read the file CRC")
    # an index entry out of order, its CRC rewritten so only the order check can see it
    b = bytearray(data)
    b[i + 8:i + 16], b[i + 16:i + 24] = b[i + 16:i + 24], b[i + 8:i + 16]
    struct.pack_into("<I", b, t + 16, zlib.crc32(b[i:t]))
    fails(bytes(b), "index entry 2")
    # non-zero padding after a payload, its record CRC rewritten
    b = bytearray(encode("text", [(b"ab", 1, b"hello")]))
    b[32 + 24 + 6] = 1
    struct.pack_into("<I", b, 32, zlib.crc32(b[36:64]))
    fails(bytes(b), "padding is not zero")
    fails(b"", "truncated", name="zero.rec")
    try:
        RecordFile(os.path.join(tmp, "missing.rec"))
        expect(False, "a missing file opens")
    except RecordFileError as e:
        expect("does not exist" in str(e), str(e))

    # an output directory through its manifest
    out = os.path.join(tmp, "out")
    shard_recs = [[(f"c00-{i:06d}", i % 3, struct.pack("<4f", i, -i, 0.5, 1e9))
                   for i in range(j * 10, j * 10 + 10 + j)] for j in range(3)]
    m = write_output(out, "f32:2x2", shard_recs, classes=3)
    expect(m["items"] == 33 and m["sample_shape"] == [2, 2], "manifest items and shape")
    got = list(read_output(out))
    expect([(k.decode(), lab, p) for _, k, lab, p in got] ==
           [r for s in shard_recs for r in s], "every record of the directory, in order")
    expect(key_checksum(k for _, k, _, _ in got) == m["key_checksum"], "key checksum")

    def dir_fails(change, words):
        with open(os.path.join(out, "manifest.json")) as f:
            good = f.read()
        mm = json.loads(good)
        change(mm)
        with open(os.path.join(out, "manifest.json"), "w") as f:
            json.dump(mm, f)
        try:
            list(read_output(out))
            raise AssertionError(f"no error; expected {words!r}")
        except RecordFileError as e:
            expect(words in str(e), f"expected {words!r}, got: {e}")
        finally:
            with open(os.path.join(out, "manifest.json"), "w") as f:
                f.write(good)

    dir_fails(lambda mm: mm.update(key_checksum="0" * 16), "key checksum")
    dir_fails(lambda mm: mm.update(items=34), "field 'items'")
    dir_fails(lambda mm: mm.update(version=2), "field 'version'")
    dir_fails(lambda mm: mm.update(classes=2), "label 2 outside [0, 2)")
    dir_fails(lambda mm: mm.update(schema="f32:5", sample_shape=[5]), "schema 'f32:2x2'")
    dir_fails(lambda mm: (mm["shards"][1].update(records=12), mm.update(items=34)), "11 records")
    dir_fails(lambda mm: mm["shards"][0].update(file="../x.rec"), "inside the directory")
    dir_fails(lambda mm: mm.pop("config_hash"), "'config_hash' is missing")
    list(read_output(out))  # restored
    shard = os.path.join(out, "shard-00001.rec")
    with RecordFile(shard) as r:
        at = r.offsets[4] + align8(20 + 10) + 3  # a payload byte of shard 1's record 4
    with open(shard, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x10]))
    try:
        list(read_output(out))
        expect(False, "a flipped payload byte in a shard went unseen")
    except RecordFileError as e:
        expect("checksum mismatch in record 4" in str(e) and "shard-00001.rec" in str(e), str(e))
    import shutil
    shutil.rmtree(tmp)
    print(f"celerrc1 self-test: {checks} checks OK "
          f"(XXH64: {'the xxhash package, checked against ' if xxh64 is not xxh64_py else ''}"
          f"the pure-Python one)")


def main(argv):
    if argv[:1] == ["--self-test"]:
        self_test()
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1])
        return 2
    path, dump = argv[0], int(argv[2]) if argv[1:2] == ["--dump"] else 0
    try:
        if os.path.isdir(path):
            m = read_manifest(path)
            n = 0
            for shard, key, label, payload in read_output(path):
                if n < dump:
                    print(f"{shard} {key!r} label {label} payload {len(payload)} bytes")
                n += 1
            print(f"{path}: OK, {n} records in {len(m['shards'])} shards, schema "
                  f"{m['schema']!r}, key checksum {m['key_checksum']}")
        else:
            with RecordFile(path) as f:
                f.verify()
                for k in range(min(dump, len(f))):
                    key, label, payload = f.record(k)
                    print(f"{k} {key!r} label {label} payload {len(payload)} bytes")
                    del payload
                print(f"{path}: OK, {len(f)} records, schema {f.schema!r}, {f.size} bytes")
    except RecordFileError as e:
        print(f"FAILED: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
