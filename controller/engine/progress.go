package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Progress is a weights download's progress, read from its log.
type Progress struct {
	Bytes, Total int64 // Total 0 while unknown
	Rate         float64
	Left         time.Duration // -1 while unknown
}

// Message is the status line of a download in progress, as a pull or an install shows one:
// "downloading Qwen/Qwen3-8B: 6.2 GB of 16.4 GB (38%), 210 MB/s, about 48s left".
func (p Progress) Message(model string) string {
	var b strings.Builder
	b.WriteString("downloading " + model + ": " + humanBytes(p.Bytes))
	if p.Total > 0 {
		fmt.Fprintf(&b, " of %s (%d%%)", humanBytes(p.Total), min(100, p.Bytes*100/p.Total))
	}
	if p.Rate > 0 {
		b.WriteString(", " + humanBytes(int64(p.Rate)) + "/s")
	}
	if p.Left >= 0 && p.Total > 0 {
		b.WriteString(", about " + p.Left.String() + " left")
	}
	return b.String()
}

// humanBytes is bytes in decimal units with one decimal, as tqdm and docker pull show them.
func humanBytes(n int64) string {
	f, units := float64(n), []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for f >= 1000 && i < len(units)-1 {
		f /= 1000
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}
