// Command capacity sizes a deployment of bridges on a NATS cluster from
// figures measured on one machine (make bench, the C scenarios), for a
// number of registrations and a delivery rate that one machine cannot
// show. It prints, for each resource, what the target needs, what one
// unit of it gives, and how many units that takes; the largest count is
// the limit hit first.
//
//	go run ./test/capacity [-registrations 1000000] [-deliveries 100000] ...
//
// The model, and why each line is what it is, is in docs/deployment.md
// ("Capacity"). Every input is a flag, so a run on other hardware can
// replace this machine's figures with its own.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"text/tabwriter"
	"time"
)

// inputs are the target and the measured figures the model starts from.
type inputs struct {
	registrations   float64
	deliveries      float64       // per second, over all registrations
	fanOut          float64       // registrations per journal message
	receiverLatency time.Duration // a receiver's time to answer
	flushInterval   time.Duration

	cpuPerDelivery time.Duration // bridge CPU per delivery (C2)
	casPerLeader   float64       // cursor writes per second one KV stream leader takes (C5)
	rowBytes       float64       // one registration's row in the regs bucket
	indexBytes     float64       // one registration in each bridge's in-memory index
	maxInFlight    float64       // --max-in-flight: POSTs of the whole bridge
	bridgeCores    float64       // cores per bridge
	bridgeMemory   float64       // bytes of memory per bridge
	journalMsgPerS float64       // messages per second one bridge's tail reads (S4 at ease)
	leaderHeadroom float64       // fraction of a leader's measured rate to plan on
	replicas       float64
}

// line is one resource of the table. A resource every bridge needs in
// full (the index of every registration, the journal's tail) is not
// divided by adding bridges: its units are the fraction of one bridge it
// takes, and above 1 the registrations must be split into several stores
// (--kv-bucket prefixes, each with its own bridges), not more bridges.
type line struct {
	resource, need, unit, per string
	units                     float64
	everyBridge               bool
}

func model(in inputs) []line {
	// A registration's cursor is written at most once a flush interval;
	// spread over a million registrations, each delivery is a write.
	perReg := in.deliveries / in.registrations
	writes := in.registrations * math.Min(perReg, 1/in.flushInterval.Seconds())
	messages := in.deliveries / in.fanOut
	concurrent := in.deliveries * in.receiverLatency.Seconds()
	cpu := in.deliveries * in.cpuPerDelivery.Seconds()
	return []line{
		{"bridge CPU", fmt.Sprintf("%.1f cores", cpu), "bridge", fmt.Sprintf("%.0f cores", in.bridgeCores),
			cpu / in.bridgeCores, false},
		{"POSTs in flight (Little's law)", fmt.Sprintf("%.0f at once", concurrent), "bridge",
			fmt.Sprintf("%.0f (--max-in-flight)", in.maxInFlight), concurrent / in.maxInFlight, false},
		{"cursor writes", fmt.Sprintf("%.0f/s", writes), "regs bucket (one stream leader)",
			fmt.Sprintf("%.0f/s", in.casPerLeader*in.leaderHeadroom), writes / (in.casPerLeader * in.leaderHeadroom), false},
		{"index memory", fmt.Sprintf("%.1f GiB on every bridge", in.registrations*in.indexBytes/(1<<30)), "bridge",
			fmt.Sprintf("%.0f GiB", in.bridgeMemory/(1<<30)), in.registrations * in.indexBytes / in.bridgeMemory, true},
		{"journal tail", fmt.Sprintf("%.0f msg/s on every bridge", messages), "bridge",
			fmt.Sprintf("%.0f msg/s", in.journalMsgPerS), messages / in.journalMsgPerS, true},
		{"store on disk", fmt.Sprintf("%.2f GiB × %.0f replicas", in.registrations*in.rowBytes/(1<<30), in.replicas), "-", "-", 0, false},
	}
}

func main() {
	var in inputs
	flag.Float64Var(&in.registrations, "registrations", 1_000_000, "registrations to serve")
	flag.Float64Var(&in.deliveries, "deliveries", 100_000, "deliveries per second to sustain")
	flag.Float64Var(&in.fanOut, "fan-out", 10, "registrations each journal message goes to")
	flag.DurationVar(&in.receiverLatency, "receiver-latency", 50*time.Millisecond, "how long receivers take to answer")
	flag.DurationVar(&in.flushInterval, "flush-interval", 20*time.Millisecond, "--flush-interval")
	flag.DurationVar(&in.cpuPerDelivery, "cpu-per-delivery", 41*time.Microsecond, "bridge CPU per delivery with the attempt log, measured (S2)")
	flag.Float64Var(&in.casPerLeader, "cas-per-leader", 14_322, "cursor writes/s of one R3 bucket, measured (C5)")
	flag.Float64Var(&in.leaderHeadroom, "leader-headroom", 0.7, "fraction of a leader's measured rate to plan on")
	flag.Float64Var(&in.rowBytes, "row-bytes", 522, "bytes of one registration's row, measured")
	flag.Float64Var(&in.indexBytes, "index-bytes", 1874, "bytes of one registration in a bridge's index (measured with the server in the same process: an upper bound)")
	flag.Float64Var(&in.maxInFlight, "max-in-flight", 64, "--max-in-flight")
	flag.Float64Var(&in.bridgeCores, "bridge-cores", 4, "cores per bridge")
	flag.Float64Var(&in.bridgeMemory, "bridge-memory", 8<<30, "bytes of memory per bridge")
	flag.Float64Var(&in.journalMsgPerS, "journal-rate", 20_000, "messages/s one bridge's tail follows (assumed, not measured here)")
	flag.Float64Var(&in.replicas, "replicas", 3, "--kv-replicas")
	flag.Parse()

	fmt.Printf("%.0f registrations, %.0f deliveries/s (fan-out %.0f: %.0f journal messages/s), receivers answering in %v\n\n",
		in.registrations, in.deliveries, in.fanOut, in.deliveries/in.fanOut, in.receiverLatency)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "resource\tthe target needs\tone unit\tgives\tunits")
	var first line
	var split []string
	for _, l := range model(in) {
		units := "-"
		switch {
		case l.everyBridge:
			units = fmt.Sprintf("%.2f of each", l.units)
			if l.units > 1 {
				split = append(split, l.resource)
			}
		case l.units > 0:
			units = fmt.Sprintf("%.1f → %.0f", l.units, math.Ceil(l.units))
			if l.units > first.units {
				first = l
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.resource, l.need, l.unit, l.per, units)
	}
	tw.Flush()
	fmt.Printf("\nhit first: %s — %.0f × %s\n", first.resource, math.Ceil(first.units), first.unit)
	for _, r := range split {
		fmt.Printf("beyond one bridge whatever their number: %s — split the registrations over several --kv-bucket prefixes\n", r)
	}
}
