package fingerprint

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"slices"
	"strconv"
)

// TLS extension numbers the fingerprints treat specially.
const (
	extServerName        = 0x0000
	extALPN              = 0x0010
	extSupportedVersions = 0x002b
)

// TLSFingerprint holds the client fingerprints of one TLS handshake.
type TLSFingerprint struct {
	// JA3 is the JA3 string: version,ciphers,extensions,curves,point
	// formats, in decimal, GREASE values removed.
	JA3 string
	// JA3Hash is the lower-case hex MD5 of JA3, the form JA3 lists use.
	JA3Hash string
	// JA4 is the JA4 fingerprint (FoxIO), as in t13d1516h2_8daaf6152771_e5627efa2ab1.
	JA4 string
}

// FingerprintHello computes the JA3 and JA4 fingerprints of a ClientHello
// as crypto/tls presents it to GetConfigForClient. It allocates the three
// strings; call it once per handshake, not per request.
//
// crypto/tls does not expose the ClientHello's legacy_version field: JA3's
// version is taken as 771 (TLS 1.2, which RFC 8446 fixes for every client
// that sends supported_versions) when that extension is present, and as the
// highest of SupportedVersions (which crypto/tls derives from
// legacy_version) otherwise. JA4's protocol letter is always 't': crypto/tls
// serves TLS over TCP.
func FingerprintHello(chi *tls.ClientHelloInfo) TLSFingerprint {
	var buf [512]byte
	ja3 := AppendJA3(buf[:0], chi)
	sum := md5.Sum(ja3)
	fp := TLSFingerprint{JA3: string(ja3), JA3Hash: hex.EncodeToString(sum[:])}
	fp.JA4 = string(AppendJA4(buf[:0], chi))
	return fp
}

// isGREASE reports whether v is one of the reserved GREASE values of RFC
// 8701 (0x0a0a, 0x1a1a, ... 0xfafa), which fingerprints ignore.
func isGREASE(v uint16) bool {
	return v&0x0f0f == 0x0a0a && v>>8 == v&0xff
}

// AppendJA3 appends the JA3 string of chi to dst (see FingerprintHello).
func AppendJA3(dst []byte, chi *tls.ClientHelloInfo) []byte {
	dst = strconv.AppendUint(dst, uint64(ja3Version(chi)), 10)
	dst = append(dst, ',')
	dst = appendDecimalList(dst, chi.CipherSuites)
	dst = append(dst, ',')
	dst = appendDecimalList(dst, chi.Extensions)
	dst = append(dst, ',')
	first := true
	for _, c := range chi.SupportedCurves {
		if isGREASE(uint16(c)) {
			continue
		}
		if !first {
			dst = append(dst, '-')
		}
		first = false
		dst = strconv.AppendUint(dst, uint64(c), 10)
	}
	dst = append(dst, ',')
	for i, p := range chi.SupportedPoints {
		if i > 0 {
			dst = append(dst, '-')
		}
		dst = strconv.AppendUint(dst, uint64(p), 10)
	}
	return dst
}

func ja3Version(chi *tls.ClientHelloInfo) uint16 {
	if slices.Contains(chi.Extensions, extSupportedVersions) {
		return tls.VersionTLS12
	}
	var best uint16
	for _, v := range chi.SupportedVersions {
		if !isGREASE(v) && v > best {
			best = v
		}
	}
	return best
}

func appendDecimalList(dst []byte, vs []uint16) []byte {
	first := true
	for _, v := range vs {
		if isGREASE(v) {
			continue
		}
		if !first {
			dst = append(dst, '-')
		}
		first = false
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	return dst
}

// AppendJA4 appends the JA4 fingerprint of chi to dst (see
// FingerprintHello): protocol, version, SNI, cipher and extension counts,
// ALPN; then the truncated SHA-256 of the sorted ciphers; then that of the
// sorted extensions (without SNI and ALPN) and the signature algorithms in
// order.
func AppendJA4(dst []byte, chi *tls.ClientHelloInfo) []byte {
	// Part a.
	dst = append(dst, 't')
	dst = append(dst, ja4Version(chi)...)
	if slices.Contains(chi.Extensions, extServerName) {
		dst = append(dst, 'd')
	} else {
		dst = append(dst, 'i')
	}
	dst = appendCount(dst, countNonGREASE(chi.CipherSuites))
	dst = appendCount(dst, countNonGREASE(chi.Extensions))
	dst = appendALPN(dst, chi.SupportedProtos)
	dst = append(dst, '_')

	// Part b: sorted ciphers. Scratch lives on the stack for any real hello
	// (a few dozen values) and is heap-allocated only beyond 128.
	var scratch [128]uint16
	ciphers := appendSortedNonGREASE(scratch[:0], chi.CipherSuites, false)
	if len(ciphers) == 0 {
		dst = append(dst, "000000000000"...)
	} else {
		h := sha256.New()
		var line [8]byte
		for i, c := range ciphers {
			if i > 0 {
				h.Write([]byte{','})
			}
			h.Write(appendHex4(line[:0], c))
		}
		dst = appendTruncatedSum(dst, h.Sum(nil))
	}
	dst = append(dst, '_')

	// Part c: sorted extensions without SNI and ALPN, then the signature
	// algorithms in the order sent.
	exts := appendSortedNonGREASE(scratch[:0], chi.Extensions, true)
	var sigs int
	for _, s := range chi.SignatureSchemes {
		if !isGREASE(uint16(s)) {
			sigs++
		}
	}
	if len(exts) == 0 && sigs == 0 {
		return append(dst, "000000000000"...)
	}
	h := sha256.New()
	var line [8]byte
	for i, e := range exts {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(appendHex4(line[:0], e))
	}
	if sigs > 0 {
		h.Write([]byte{'_'})
		first := true
		for _, s := range chi.SignatureSchemes {
			if isGREASE(uint16(s)) {
				continue
			}
			if !first {
				h.Write([]byte{','})
			}
			first = false
			h.Write(appendHex4(line[:0], uint16(s)))
		}
	}
	return appendTruncatedSum(dst, h.Sum(nil))
}

func ja4Version(chi *tls.ClientHelloInfo) string {
	var v uint16
	if slices.Contains(chi.Extensions, extSupportedVersions) {
		for _, s := range chi.SupportedVersions {
			if !isGREASE(s) && s > v {
				v = s
			}
		}
	} else {
		v = ja3Version(chi)
	}
	switch v {
	case tls.VersionTLS13:
		return "13"
	case tls.VersionTLS12:
		return "12"
	case tls.VersionTLS11:
		return "11"
	case tls.VersionTLS10:
		return "10"
	case 0x0300:
		return "s3"
	case 0x0002:
		return "s2"
	}
	return "00"
}

func countNonGREASE(vs []uint16) int {
	n := 0
	for _, v := range vs {
		if !isGREASE(v) {
			n++
		}
	}
	return n
}

// appendCount appends n as two decimal digits, capped at 99 as JA4 says.
func appendCount(dst []byte, n int) []byte {
	n = min(n, 99)
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// appendALPN appends the first and last characters of the first ALPN value,
// or of its hex form when either is not alphanumeric; "00" without ALPN.
func appendALPN(dst []byte, protos []string) []byte {
	if len(protos) == 0 || protos[0] == "" {
		return append(dst, "00"...)
	}
	p := protos[0]
	first, last := p[0], p[len(p)-1]
	if isAlnum(first) && isAlnum(last) {
		return append(dst, first, last)
	}
	const digits = "0123456789abcdef"
	return append(dst, digits[first>>4], digits[last&0x0f])
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func appendSortedNonGREASE(dst, vs []uint16, dropSNIALPN bool) []uint16 {
	for _, v := range vs {
		if isGREASE(v) || dropSNIALPN && (v == extServerName || v == extALPN) {
			continue
		}
		dst = append(dst, v)
	}
	slices.Sort(dst)
	return dst
}

func appendHex4(dst []byte, v uint16) []byte {
	const digits = "0123456789abcdef"
	return append(dst, digits[v>>12], digits[v>>8&0xf], digits[v>>4&0xf], digits[v&0xf])
}

func appendTruncatedSum(dst, sum []byte) []byte {
	return hex.AppendEncode(dst, sum[:6])
}
