package statuspage

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// WithActions lets the Page forgive one client's penalty and reset one
// client's usage of one per-key rule (shed.Controller.Pardon and
// ResetKey), for the requests authorize approves: the Page checks no
// credentials itself. The actions are POSTs of a JSON body to "pardon"
// ({"key": "198.51.100.7"}) and "reset" ({"rule": "daily", "key":
// "acme"}) beside the page, or of a hashed key as the page lists it
// ({"hash": "h:..."}, shed.Controller.PardonHash and ResetHash: the
// buttons of the hot-key and penalized rows); the body's media type must be
// application/json, which a cross-site form cannot send without the CORS
// preflight that the Page never grants, so another site cannot make an
// operator's browser act. The answer is JSON: {"done": true} and, for a
// pardon, whether the client had a penalty; errors never repeat the key.
func WithActions(authorize func(*http.Request) bool) Option {
	return optionFunc(func(c *config) error {
		if authorize == nil {
			return errors.New("statuspage: WithActions(nil)")
		}
		c.authorize = authorize
		return nil
	})
}

// maxActionBody bounds an action's JSON body.
const maxActionBody = 4 << 10

// action serves a POST to the pardon or reset action (name).
func (p *Page) action(w http.ResponseWriter, r *http.Request, name string) {
	if p.authorize == nil {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "statuspage: read-only", http.StatusMethodNotAllowed)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "statuspage: actions are POSTs", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "statuspage: an action's body is application/json", http.StatusUnsupportedMediaType)
		return
	}
	if !p.authorize(r) {
		http.Error(w, "statuspage: not authorized", http.StatusForbidden)
		return
	}
	var req struct {
		Rule string `json:"rule"`
		Key  string `json:"key"`
		Hash string `json:"hash"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || (req.Key == "") == (req.Hash == "") || (name == "reset") != (req.Rule != "") {
		http.Error(w, "statuspage: the body names a key or a hash, and for a reset a rule, and nothing else", http.StatusBadRequest)
		return
	}
	answer := map[string]any{"done": true}
	var err error
	switch {
	case name == "pardon":
		var had bool
		if req.Hash != "" {
			had, err = p.c.PardonHash(req.Hash)
		} else {
			had, err = p.c.Pardon(req.Key)
		}
		answer["penalized"] = had
	case req.Hash != "":
		err = p.c.ResetHash(r.Context(), req.Rule, req.Hash)
	default:
		err = p.c.ResetKey(r.Context(), req.Rule, req.Key)
	}
	if err != nil {
		// shed's errors never name the key.
		http.Error(w, strings.TrimPrefix(err.Error(), "shed: "), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(answer)
}
