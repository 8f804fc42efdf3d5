package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Write puts results.json, report.md and the SVG charts into dir,
// creating it when missing.
func Write(dir string, res *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(Report(res)), 0o644); err != nil {
		return fmt.Errorf("write report.md: %w", err)
	}
	return writeCharts(dir, res)
}
