package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// Every problem is reported with the file, the line and the field path.
func TestParseErrors(t *testing.T) {
	const head = "{\n  \"version\": 1,\n  \"rules\": [\n"
	rule := func(body string) string { return head + "    {\"name\": \"r\",\n" + body + "}\n  ]\n}\n" }
	cases := []struct {
		name, doc, want string
	}{
		{"syntax", "{\n  \"version\": 1,\n  \"rules\": [,]\n}", "t.json:3: invalid character"},
		{"unknown field", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\",\n     \"limt\": 3\n"),
			"t.json:6: rules[0].limt: unknown field"},
		{"unknown top field", "{\n \"version\": 1,\n \"rulez\": []\n}", "t.json:3: rulez: unknown field"},
		{"wrong case", "{\n \"Version\": 1\n}", "t.json:2: Version: unknown field"},
		{"type", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\",\n     \"limit\": \"5\", \"window\": \"1m\"\n"),
			"t.json:6: rules.limit: cannot be a JSON string"},
		{"limit", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\",\n     \"limit\": 0, \"window\": \"1m\"\n"),
			"t.json:6: rules[0].limit: must be positive, got 0"},
		{"negative limit", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"window\": \"1m\",\n     \"limit\": -5\n"),
			"t.json:6: rules[0].limit: must be positive, got -5"},
		{"duration", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5,\n\n     \"window\": \"15 minutes\"\n"),
			"t.json:7: rules[0].window: invalid duration \"15 minutes\""},
		{"window on bucket", rule("     \"identity\": \"ip\", \"algorithm\": \"token_bucket\", \"limit\": 5,\n     \"rate\": {\"count\": 1, \"per\": \"1s\"},\n     \"window\": \"1m\"\n"),
			"t.json:7: rules[0].window: applies only to"},
		{"rate count", rule("     \"identity\": \"ip\", \"algorithm\": \"token_bucket\", \"limit\": 5,\n     \"rate\": {\"per\": \"1s\",\n       \"count\": 0}\n"),
			"t.json:7: rules[0].rate.count: must be positive"},
		{"identity", rule("     \"identity\": \"cookie\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"\n"),
			"t.json:5: rules[0].identity: must be global"},
		{"category", rule("     \"category\": \"nope\",\n     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"\n"),
			"t.json:5: rules[0].category: \"nope\" is neither"},
		{"soft limit", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\",\n     \"soft_limit\": 1.5\n"),
			"t.json:6: rules[0].soft_limit: must be in (0, 1]"},
		{"version", "{\n \"version\": 2,\n \"rules\": []\n}", "t.json:2: version: must be 1"},
		{"no rules", "{\n \"version\": 1\n}", "t.json:1: rules: at least one rule"},
		{"trailing", "{\"version\": 1, \"rules\": []} {}", "data after the document"},
		{"eof", "{\"version\": 1,", "unexpected end"},
		{"route", "{\"version\": 1,\n\"categories\": [{\"name\": \"a\",\n \"routes\": [\"login\"]}], \"rules\": [{\"name\": \"r\", \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"}]}",
			"t.json:3: categories[0].routes[0]: route \"login\" must start with /"},
		{"duplicate", rule("     \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"},\n    {\"name\": \"r\", \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"\n"),
			"t.json:6: rules[1].name: rule name \"r\" is used twice"},
		{"penalty", "{\"version\": 1, \"rules\": [{\"name\": \"r\", \"identity\": \"ip\", \"algorithm\": \"sliding_log\", \"limit\": 5, \"window\": \"1m\"}],\n \"penalties\": {\"identity\": \"global\", \"capacity\": 10}}",
			"t.json:2: penalties.identity: must be ip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Parse("t.json", []byte(tc.doc))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.doc)
			}
			var pe *policy.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *policy.Error: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "policy: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// Errors of shed and the concurrency package surface at New with the
// rule's place.
func TestNewErrorsNameTheRule(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "ok", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"},
    {"name": "bad", "identity": "global", "algorithm": "sliding_log", "limit": 5, "window": "1m",
     "failure": "fail_closed"}
  ]
}`
	p, err := policy.Parse("t.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.New()
	if err == nil || !strings.Contains(err.Error(), "t.json:5: rules[1]: shed: rule \"bad\"") {
		t.Fatalf("got %v", err)
	}
	// A window the ratelimit package rejects (over its span bound).
	doc = `{"version": 1, "rules": [
  {"name": "huge", "identity": "ip", "algorithm": "sliding_window", "limit": 5, "window": "50000d"}]}`
	p, err = policy.Parse("t.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = p.New(); err == nil || !strings.Contains(err.Error(), "t.json:2: rules[0]: shed: rule \"huge\"") {
		t.Fatalf("got %v", err)
	}
}

func TestCategory(t *testing.T) {
	p, err := policy.Parse("t.json", []byte(`{"version": 1,
 "categories": [
   {"name": "auth", "routes": ["POST /login"]},
   {"name": "reports", "routes": ["/api/reports/*"], "methods": ["write"]},
   {"name": "everything-else-read", "methods": ["read"]}
 ],
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, route, want string }{
		{"POST", "/login", "auth"},
		{"POST", "POST /login", "auth"},
		{"GET", "/login", "everything-else-read"},
		{"PUT", "/login", "write"},
		{"POST", "/api/reports/42", "reports"},
		{"DELETE", "/api/reports/", "reports"},
		{"GET", "/api/reports/42", "everything-else-read"},
		{"CONNECT", "/x", "write"},
		{"propfind", "/x", "write"},
	} {
		if got := p.Category(tc.method, tc.route); got != tc.want {
			t.Errorf("Category(%s, %s) = %q, want %q", tc.method, tc.route, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { p.Category("POST", "/api/reports/42") }); n != 0 {
		t.Errorf("Category allocates %v times", n)
	}
}

// Hostile documents are refused before they cost much: too large, too
// deep, too many rules.
func TestParseBounds(t *testing.T) {
	big := make([]byte, policy.MaxSize+1)
	if _, err := policy.Parse("big.json", big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversize: %v", err)
	}
	deep := `{"version": 1, "rules": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	if _, err := policy.Parse("deep.json", []byte(deep)); err == nil || !strings.Contains(err.Error(), "nested too deep") {
		t.Errorf("deep: %v", err)
	}
	rule := `{"name": "r%d", "identity": "ip", "algorithm": "sliding_log", "limit": 1, "window": "1m"}`
	var rules []string
	for i := range policy.MaxRules + 1 {
		rules = append(rules, strings.Replace(rule, "%d", strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26), 1))
	}
	many := `{"version": 1, "rules": [` + strings.Join(rules, ",\n") + `]}`
	if _, err := policy.Parse("many.json", []byte(many)); err == nil || !strings.Contains(err.Error(), "at most 1024 rules") {
		t.Errorf("many: %v", err)
	}
}
