// Command kfake is a TEST broker: an in-memory, single-process cluster that
// speaks the Kafka protocol (github.com/twmb/franz-go/pkg/kfake), for ferry's
// local stack and tests. It keeps nothing on disk and is no substitute for
// Kafka: use a real Kafka for anything but tests.
//
//	go run ./deploy/kfake [-port 19092] [-brokers 1]
//
// It listens on 127.0.0.1 only and runs until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 19092, "port of the first broker (the others take the next ones)")
	brokers := flag.Int("brokers", 1, "number of brokers")
	flag.Parse()
	ports := make([]int, *brokers)
	for i := range ports {
		ports[i] = *port + i
	}
	c, err := kfake.NewCluster(kfake.Ports(ports...), kfake.NumBrokers(*brokers), kfake.AllowAutoTopicCreation())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake (TEST broker):", err)
		os.Exit(1)
	}
	fmt.Println("kfake TEST broker (in memory, not for production) listening on", c.ListenAddrs())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}
