// Command llama runs a Llama-family model with a forward pass written in Go over kiln's
// ops (forward.go), loading the configuration, weights and tokenizer through kiln's C
// API, and prints a greedy continuation as it goes:
//
//	go run ./examples/llama -prompt "What is a kiln?" -n 64
//
// Without -model it reads the default model that kiln's scripts/setup fetches
// (SmolLM2-135M-Instruct). The prompt goes through the model's chat template unless
// -raw is given.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"kiln.dev/kiln"
)

// Greedy appends the prompt and then up to n tokens, each the most likely one, stopping
// early at the model's end-of-generation tokens (which it does not return). onToken, if
// not nil, gets each token as it comes.
func (m *Llama) Greedy(prompt []int32, n int, onToken func(token int32)) ([]int32, error) {
	c, err := m.NewCache(len(prompt) + n)
	if err != nil {
		return nil, err
	}
	logits, err := m.Forward(prompt, c)
	var out []int32
	for err == nil && len(out) < n {
		var picks *kiln.Array
		var top []int32
		if picks, err = kiln.Argmax(logits, 1); err != nil {
			break
		}
		if top, err = picks.Int32s(); err != nil {
			break
		}
		next := top[len(top)-1] // after the last token
		if m.file.IsEndOfGeneration(next) {
			break
		}
		out = append(out, next)
		if onToken != nil {
			onToken(next)
		}
		if len(out) < n {
			logits, err = m.Forward([]int32{next}, c)
		}
	}
	return out, err
}

func run() error {
	path := flag.String("model", "", "a GGUF or safetensors model (default: kiln's default model)")
	prompt := flag.String("prompt", "What is a kiln?", "the prompt")
	n := flag.Int("n", 64, "tokens to generate at most")
	raw := flag.Bool("raw", false, "use the prompt as it is, without the chat template")
	flag.Parse()
	if *path == "" {
		var err error
		if *path, err = kiln.DefaultModelPath(); err != nil {
			return err
		}
	}
	file, err := kiln.LoadModel(*path)
	if err != nil {
		return err
	}
	m, err := Load(file)
	if err != nil {
		return err
	}
	text := *prompt
	if !*raw {
		if text, err = file.ChatPrompt([]kiln.ChatMessage{{Role: "user", Content: text}}); err != nil {
			return err
		}
	}
	ids, err := file.Tokenize(text, true, true)
	if err != nil {
		return err
	}
	// Print what the tokens so far spell, holding back a character split over tokens
	// (it decodes to U+FFFD until its last byte comes).
	var generated []int32
	printed := 0
	_, err = m.Greedy(ids, *n, func(token int32) {
		generated = append(generated, token)
		if s, err := file.Detokenize(generated); err == nil && len(s) >= printed && !strings.HasSuffix(s, "\uFFFD") {
			fmt.Print(s[printed:])
			printed = len(s)
		}
	})
	fmt.Println()
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "llama:", err)
		os.Exit(1)
	}
}
