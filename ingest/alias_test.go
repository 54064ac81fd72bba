package ingest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"
)

// allocated is the bytes fn allocates (runtime.MemStats.TotalAlloc), the GC run first.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// aliasedSafetensors is a safetensors file whose k tensors of n F16 elements all name the same
// data bytes [0, 2n): the file holds one tensor's data, its header claims k.
func aliasedSafetensors(k, n int) []byte {
	var h strings.Builder
	h.WriteString("{")
	for i := range k {
		if i > 0 {
			h.WriteString(",")
		}
		fmt.Fprintf(&h, `"t%03d":{"dtype":"F16","shape":[%d],"data_offsets":[0,%d]}`, i, n, 2*n)
	}
	h.WriteString("}")
	b := binary.LittleEndian.AppendUint64(nil, uint64(h.Len()))
	return append(append(b, h.String()...), make([]byte, 2*n)...)
}

// Tensors naming the same bytes are refused before any is converted: converting each first
// turned a 16 MB file into gigabytes of float32 copies before the overlap was seen.
func TestSafetensorsAliasesRefusedBeforeConverting(t *testing.T) {
	const k, n = 64, 1 << 20 // 2 MiB of data; converted, each tensor takes 4 MiB
	data := aliasedSafetensors(k, n)
	for _, c := range []struct {
		name  string
		parse func() error
	}{
		{"Parse", func() error { _, err := Parse(data, "x"); return err }},
		{"ParseAtMost", func() error { _, err := ParseAtMost(data, "x", n); return err }},
		{"ParseData", func() error { _, err := ParseData(data, "x"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := allocated(func() { err = c.parse() })
			if err == nil || !strings.Contains(err.Error(), "overlaps the tensor before it") {
				t.Fatalf("error %v, want the aliased tensors refused", err)
			}
			// The header's decoding takes some kilobytes; one converted tensor would take 4 MiB.
			if got > 1<<20 {
				t.Errorf("refusing %d aliased tensors allocated %d bytes", k, got)
			}
		})
	}
}

// rawMember is one member of a zip archive written by hand (rawZip): archive/zip's writer
// cannot list one member twice or make members overlap.
type rawMember struct {
	name    string
	body    []byte // the member's bytes
	deflate bool   // stored deflated, else as they are
}

// rawEntry is an entry of rawZip's central directory: a name for the member at index member,
// whose local header it places skip bytes into that member's (inside its data, for skip > 0).
type rawEntry struct {
	name         string
	member, skip int
}

// rawZip writes the local headers and data of members, without data descriptors, then a
// central directory of the entries dir.
func rawZip(t testing.TB, members []rawMember, dir []rawEntry) []byte {
	var b []byte
	offs := make([]int, len(members))
	fixed := make([][]byte, len(members)) // the header fields a local header and an entry share
	for i, m := range members {
		method, data := zip.Store, m.body
		if m.deflate {
			var buf bytes.Buffer
			fw, err := flate.NewWriter(&buf, flate.BestCompression)
			if err != nil {
				t.Fatal(err)
			}
			fw.Write(m.body)
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			method, data = zip.Deflate, buf.Bytes()
		}
		f := binary.LittleEndian.AppendUint16(nil, 20)  // version needed
		f = binary.LittleEndian.AppendUint16(f, 0)      // flags
		f = binary.LittleEndian.AppendUint16(f, method) //
		f = binary.LittleEndian.AppendUint32(f, 0)      // time, date
		f = binary.LittleEndian.AppendUint32(f, crc32.ChecksumIEEE(m.body))
		f = binary.LittleEndian.AppendUint32(f, uint32(len(data)))
		f = binary.LittleEndian.AppendUint32(f, uint32(len(m.body)))
		offs[i], fixed[i] = len(b), f
		b = binary.LittleEndian.AppendUint32(b, 0x04034b50)
		b = append(b, f...)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m.name)))
		b = binary.LittleEndian.AppendUint16(b, 0) // extra
		b = append(append(b, m.name...), data...)
	}
	cd := len(b)
	for _, e := range dir {
		b = binary.LittleEndian.AppendUint32(b, 0x02014b50)
		b = binary.LittleEndian.AppendUint16(b, 20) // version made by
		b = append(b, fixed[e.member]...)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.name)))
		b = append(b, make([]byte, 12)...) // extra, comment, disk, attributes
		b = binary.LittleEndian.AppendUint32(b, uint32(offs[e.member]+e.skip))
		b = append(b, e.name...)
	}
	size := len(b) - cd
	b = binary.LittleEndian.AppendUint32(b, 0x06054b50)
	b = binary.LittleEndian.AppendUint32(b, 0) // this disk, the directory's disk
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dir)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dir)))
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(cd))
	return binary.LittleEndian.AppendUint16(b, 0) // comment length
}

// sameMember is a central directory listing member 0 under k names.
func sameMember(k int) []rawEntry {
	dir := make([]rawEntry, k)
	for i := range dir {
		dir[i] = rawEntry{name: fmt.Sprintf("m%d.npy", i)}
	}
	return dir
}

// An .npz whose members share their data (one member listed under many names, or a member whose
// local header lies inside another's data, as in the overlapping zip bombs) is refused before
// any member is decompressed. Each entry used to be decompressed and converted in turn: a 7.5 KB
// archive took 601 MiB. Python's zipfile refuses such archives too.
func TestNPZSharedMembersRefused(t *testing.T) {
	const n = 4 << 20 // float16 zeros: 8 MiB that deflate into about 8 KiB
	zeros := func(n int) []byte {
		return npyBytes(1, fmt.Sprintf("{'descr': '<f2', 'fortran_order': False, 'shape': (%d,), }\n", n), make([]byte, 2*n))
	}
	small := npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", make([]byte, 8))
	// b.npy's local header and data, to be stored inside a.npy's data.
	inner := rawZip(t, []rawMember{{name: "b.npy", body: small}}, nil)
	inner = inner[:len(inner)-22] // without the end of central directory record
	cases := []struct {
		name    string
		archive []byte
		most    int
		want    string
	}{
		// The sizes the entries declare add up to more than the archive can hold.
		{"deflated member under 16 names", rawZip(t, []rawMember{{"m0.npy", zeros(n), true}}, sameMember(16)), n,
			`the members up to "m1.npy" declare 16777364 bytes, more than the archive`},
		// Sizes the archive could hold: the shared data is seen.
		{"deflated member under 2 names", rawZip(t, []rawMember{{"m0.npy", zeros(1024), true}}, sameMember(2)), n,
			`members "m0.npy" and "m1.npy" share their data`},
		{"stored member under 3 names", rawZip(t, []rawMember{{name: "m0.npy", body: small}}, sameMember(3)), MaxElements, `share their data`},
		{"a member inside another", rawZip(t, []rawMember{{name: "a.npy", body: append(inner, small...)}},
			[]rawEntry{{"a.npy", 0, 0}, {"b.npy", 0, 30 + len("a.npy")}}), MaxElements, `members "a.npy" and "b.npy" share their data`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := allocated(func() { _, err = ParseAtMost(c.archive, "x", c.most) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if got > 1<<20 {
				t.Errorf("refusing a %d-byte archive allocated %d bytes", len(c.archive), got)
			}
		})
	}
	// The builder writes sound archives: members under their own names are read.
	ok := rawZip(t, []rawMember{{name: "a.npy", body: small}, {"b.npy", zeros(n), true}}, []rawEntry{{"a.npy", 0, 0}, {"b.npy", 1, 0}})
	if ts, err := ParseNPZ(ok); err != nil || len(ts) != 2 || len(ts[1].Data) != n {
		t.Fatalf("two distinct members: %d tensors, error %v", len(ts), err)
	}
}
