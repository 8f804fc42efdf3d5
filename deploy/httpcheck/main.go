// Command httpcheck is the container healthcheck of the ferry image, which
// has no shell, wget or curl: it GETs each URL given and exits 0 when all
// answer 200, else 1.
//
//	httpcheck http://127.0.0.1:9187/readyz
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: httpcheck URL...")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 3 * time.Second}
	for _, url := range os.Args[1:] {
		resp, err := client.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "httpcheck:", err)
			os.Exit(1)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "httpcheck: %s: %s\n", url, resp.Status)
			os.Exit(1)
		}
	}
}
