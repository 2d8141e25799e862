package fingerprint

import (
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// chromeLikeHello is the ClientHello of the JA4 specification's example
// (t13d1516h2_8daaf6152771_e5627efa2ab1), with GREASE values added in the
// places a browser puts them and the ciphers and extensions out of order.
func chromeLikeHello() *tls.ClientHelloInfo {
	return &tls.ClientHelloInfo{
		CipherSuites: []uint16{0x3a3a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030,
			0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035},
		Extensions: []uint16{0x8a8a, 0x0000, 0x0017, 0xff01, 0x000a, 0x000b, 0x0023, 0x0010,
			0x0005, 0x000d, 0x0012, 0x0033, 0x002d, 0x002b, 0x001b, 0x4469, 0x0015, 0xbaba},
		SupportedCurves:   []tls.CurveID{0x4a4a, tls.X25519, tls.CurveP256, tls.CurveP384},
		SupportedPoints:   []uint8{0},
		SignatureSchemes:  []tls.SignatureScheme{0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601},
		SupportedProtos:   []string{"h2", "http/1.1"},
		SupportedVersions: []uint16{0x6a6a, tls.VersionTLS13, tls.VersionTLS12},
		ServerName:        "example.com",
	}
}

func TestJA4SpecificationExample(t *testing.T) {
	if got := string(AppendJA4(nil, chromeLikeHello())); got != "t13d1516h2_8daaf6152771_e5627efa2ab1" {
		t.Fatalf("JA4 %s", got)
	}
}

func TestJA3String(t *testing.T) {
	fp := FingerprintHello(chromeLikeHello())
	want := "771,4865-4866-4867-49195-49199-49196-49200-52393-52392-49171-49172-156-157-47-53," +
		"0-23-65281-10-11-35-16-5-13-18-51-45-43-27-17513-21,29-23-24,0"
	if fp.JA3 != want {
		t.Fatalf("JA3\n got %s\nwant %s", fp.JA3, want)
	}
	sum := md5.Sum([]byte(want))
	if fp.JA3Hash != hex.EncodeToString(sum[:]) {
		t.Fatal("JA3 hash")
	}
}

func TestJA4Parts(t *testing.T) {
	cases := []struct {
		name string
		edit func(*tls.ClientHelloInfo)
		want string // regexp over the whole JA4
	}{
		{"no SNI", func(c *tls.ClientHelloInfo) { c.Extensions = c.Extensions[2:]; c.ServerName = "" }, `^t13i1515h2_`},
		{"no ALPN", func(c *tls.ClientHelloInfo) { c.SupportedProtos = nil }, `^t13d151600_`},
		{"non-alphanumeric ALPN", func(c *tls.ClientHelloInfo) { c.SupportedProtos = []string{"\xab\x01\xcd"} }, `^t13d1516ad_`},
		{"TLS 1.2 without supported_versions", func(c *tls.ClientHelloInfo) {
			c.Extensions = []uint16{0, 10, 11}
			c.SupportedVersions = []uint16{tls.VersionTLS12, tls.VersionTLS11}
		}, `^t12d1503h2_8daaf6152771_[0-9a-f]{12}$`},
		{"no ciphers, no extensions", func(c *tls.ClientHelloInfo) {
			c.CipherSuites, c.Extensions, c.SignatureSchemes, c.SupportedVersions = nil, nil, nil, nil
		}, `^t00i0000h2_000000000000_000000000000$`},
		{"counts capped at 99", func(c *tls.ClientHelloInfo) {
			c.CipherSuites = make([]uint16, 150)
			for i := range c.CipherSuites {
				c.CipherSuites[i] = uint16(i + 1)
			}
		}, `^t13d9916h2_`},
	}
	for _, c := range cases {
		chi := chromeLikeHello()
		c.edit(chi)
		got := string(AppendJA4(nil, chi))
		if !regexp.MustCompile(c.want).MatchString(got) {
			t.Errorf("%s: %s !~ %s", c.name, got, c.want)
		}
	}
}

func TestGREASE(t *testing.T) {
	n := 0
	for v := range 1 << 16 {
		if isGREASE(uint16(v)) {
			n++
			if v&0xff != 0x0a|v&0xf0 {
				t.Errorf("%#04x", v)
			}
		}
	}
	if n != 16 {
		t.Fatalf("%d GREASE values, want 16", n)
	}
}

// handshake makes one request with its own connection to srv using cfg and
// returns what the handler saw.
func handshake(t *testing.T, srv *httptest.Server, cfg *tls.Config) string {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTLSFingerprintOverLoopback(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp, ok := TLSFromContext(r.Context())
		if !ok {
			http.Error(w, "no fingerprint", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s|%s|%s", fp.JA3, fp.JA3Hash, fp.JA4)
	}))
	captured, err := CaptureTLS(&tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = captured
	srv.Config.ConnContext = ConnContext
	srv.StartTLS() // listens on 127.0.0.1
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport).TLSClientConfig

	tls12 := base.Clone()
	tls12.MaxVersion = tls.VersionTLS12
	tls12.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	curves := base.Clone()
	curves.CurvePreferences = []tls.CurveID{tls.CurveP256}
	alpn := base.Clone()
	alpn.NextProtos = []string{"http/1.1"}

	first := handshake(t, srv, base)
	if again := handshake(t, srv, base.Clone()); again != first {
		t.Fatalf("one client config, two fingerprints:\n%s\n%s", first, again)
	}
	parts := strings.Split(first, "|")
	if len(parts) != 3 || !regexp.MustCompile(`^t13i\d{4}00_[0-9a-f]{12}_[0-9a-f]{12}$`).MatchString(parts[2]) ||
		!strings.HasPrefix(parts[0], "771,") {
		t.Fatalf("unexpected fingerprint %q", first)
	}
	seen := map[string]string{first: "base"}
	for name, cfg := range map[string]*tls.Config{"tls12": tls12, "curves": curves, "alpn": alpn} {
		got := handshake(t, srv, cfg)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s and %s share fingerprint %s", name, prev, got)
		}
		seen[got] = name
		if got2 := handshake(t, srv, cfg.Clone()); got2 != got {
			t.Errorf("%s unstable: %s vs %s", name, got, got2)
		}
	}
	if got := handshake(t, srv, tls12); !regexp.MustCompile(`\|t12i02\d\d00_`).MatchString(got) {
		t.Error("TLS 1.2 client not seen as t12 with 2 ciphers: " + got)
	}
}

func TestTLSFromContextWithoutSlot(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	if _, ok := TLSFromContext(r.Context()); ok {
		t.Fatal("fingerprint from nowhere")
	}
	if _, ok := TLSFromContext(ConnContext(r.Context(), nil)); ok {
		t.Fatal("fingerprint before any handshake")
	}
	if _, err := CaptureTLS(nil); err == nil {
		t.Fatal("nil config accepted")
	}
}

// FuzzFingerprintHello feeds arbitrary hello contents to the fingerprints:
// no panic, JA4 always well-formed, output bounded by the input.
func FuzzFingerprintHello(f *testing.F) {
	f.Add([]byte{0x13, 0x01, 0x0a, 0x0a, 0x00, 0x00, 0x00, 0x10}, []byte{0, 1}, "h2", true)
	f.Add([]byte{}, []byte{}, "", false)
	f.Add([]byte{0xff}, []byte{0x2b}, "\x00", true)
	ja4 := regexp.MustCompile(`^t(13|12|11|10|s3|s2|00)[di]\d{4}[0-9a-zA-Z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$`)
	f.Fuzz(func(t *testing.T, data, points []byte, alpn string, sni bool) {
		u16 := func(b []byte) []uint16 {
			out := make([]uint16, len(b)/2)
			for i := range out {
				out[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
			}
			return out
		}
		// One byte string split four ways, so the fuzzer explores all lists.
		q := len(data) / 4
		chi := &tls.ClientHelloInfo{
			CipherSuites:      u16(data[:q]),
			Extensions:        u16(data[q : 2*q]),
			SupportedVersions: u16(data[2*q : 3*q]),
			SupportedPoints:   points,
		}
		for _, v := range u16(data[3*q:]) {
			chi.SupportedCurves = append(chi.SupportedCurves, tls.CurveID(v))
			chi.SignatureSchemes = append(chi.SignatureSchemes, tls.SignatureScheme(v))
		}
		if alpn != "" {
			chi.SupportedProtos = []string{alpn}
		}
		if sni {
			chi.Extensions = append(chi.Extensions, 0)
		}
		var fp TLSFingerprint
		// Five allocations for a real hello (the strings and hash state),
		// a scratch spill beyond 128 values and logarithmic buffer growth.
		if n := testing.AllocsPerRun(1, func() { fp = FingerprintHello(chi) }); n > float64(8+bits.Len(uint(len(data)+len(points)))) {
			t.Fatalf("%v allocations for %d input bytes", n, len(data)+len(points))
		}
		if !ja4.MatchString(fp.JA4) {
			t.Fatalf("malformed JA4 %q", fp.JA4)
		}
		// Every listed value costs at most 6 bytes ("65535-") of JA3.
		if max := 16 + 6*(len(data)/2+len(points)+1); len(fp.JA3) > max {
			t.Fatalf("JA3 of %d bytes from %d input bytes", len(fp.JA3), len(data))
		}
		if len(fp.JA3Hash) != 32 {
			t.Fatal(fp.JA3Hash)
		}
	})
}
