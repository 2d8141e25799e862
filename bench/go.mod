module github.com/sluicehq/sluice/bench

go 1.26.0

replace github.com/sluicehq/sluice => ../

require (
	github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000
	golang.org/x/sync v0.25.0
)

require golang.org/x/time v0.16.0
