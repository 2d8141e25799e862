package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes r as readable tables: the policy as a whole, each
// rule alone, and the penalized keys.
func (r *ReplayReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pct := func(f float64) string { return fmt.Sprintf("%.3f%%", 100*f) }
	fmt.Fprintf(tw, "records\t%d\tspan\t%v\treordered\t%d\tlabelled\t%v\n", r.Records, r.Span.Round(time.Second), r.Reordered, r.Labelled)
	p := r.Policy
	fmt.Fprintf(tw, "policy\twould_reject\t%d\t(%s)\tfalse_positive\t%s\tcatch\t%s\tearly_warnings\t%d\n", p.WouldReject, pct(p.RejectRate), pct(p.FalsePositiveRate), pct(p.CatchRate), r.EarlyWarnings)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "rule\tidentity\tcategory\ttier\tlimit/window\tapplied\twould_reject\treject_rate\tfalse_pos\tcatch\tkeys\tlegit_keys\tp50\tp95\tp99\tall_p99\trecommended")
	for _, x := range r.Rules {
		cat, tier := x.Category, x.Tier
		if cat == "" {
			cat = "*"
		}
		if tier == "" {
			tier = "*"
		}
		rec := "-"
		if x.Recommended > 0 {
			rec = fmt.Sprintf("%d/%v", x.Recommended, x.Window)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%v\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n",
			x.Rule, x.Identity, cat, tier, x.Limit, x.Window, x.Applied, x.WouldReject, pct(x.RejectRate),
			pct(x.FalsePositiveRate), pct(x.CatchRate), x.Keys, x.LegitKeys, x.P50, x.P95, x.P99, x.AllP99, rec)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(tw, "%s\t(not replayed: needs service times)\n", s)
	}
	if len(r.Penalized) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "penalized key\tpenalized requests\tabusive")
		for _, k := range r.Penalized {
			fmt.Fprintf(tw, "%s\t%d\t%v\n", k.Key, k.Requests, k.Abusive)
		}
	}
	return tw.Flush()
}
