package use

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
)

//go:embed weights.bin
var weightsBin []byte

const (
	// MaxTokens is the model's input length; longer inputs keep their
	// first MaxTokens tokens, as the reference does.
	MaxTokens = 128
	// Dimensions is the length of an embedding.
	Dimensions = 512
	// ModelID names the model and its weight format; a change of either
	// makes stored vectors stale.
	ModelID = "builtin-use-lite-f16"

	layerNormEpsilon = 1e-6
	heads            = 4
)

// Model is Universal Sentence Encoder lite: a SentencePiece tokenizer, a
// 256-d token embedding, two transformer layers (the first widens to 512),
// mean pooling, a tanh projection and L2 normalisation. It is safe for
// concurrent use.
type Model struct {
	tok *Tokenizer
	w   map[string]tensor
	// layers holds the dense layers' kernels, packed for the matrix
	// kernel in use.
	layers map[string]linalg.Packed
	kern   *linalg.Kernel
	// workspaces holds the buffers of forward passes, reused by later
	// passes: an embedding allocates its result and nothing else.
	workspaces sync.Pool
}

// workspace is one forward pass's buffers, taken in the same order by
// every pass, so each grows to the largest input seen.
type workspace struct {
	bufs [][]float32
	next int
}

// take returns the next buffer, n floats of zero.
func (ws *workspace) take(n int) []float32 {
	if ws.next == len(ws.bufs) {
		ws.bufs = append(ws.bufs, nil)
	}
	b := ws.bufs[ws.next]
	if cap(b) < n {
		b = make([]float32, n)
		ws.bufs[ws.next] = b
	}
	ws.next++
	b = b[:n]
	clear(b)
	return b
}

type tensor struct {
	rows, cols int
	data       []float32
}

// Load parses the embedded weights (float16) and packs the dense layers'
// kernels for the fastest matrix kernel the CPU runs (AVX-512, AVX2 with
// FMA, else gonum's portable one): kept as float16 for a kernel that
// widens them as it reads them (AVX2 with F16C), which streams half the
// bytes for the same vectors, else widened to float32. The other weights
// are widened to float32.
func Load() (*Model, error) {
	return load(linalg.Best)
}

// load is Load with the given matrix kernel, nil for gonum's.
func load(kern *linalg.Kernel) (*Model, error) {
	tok, err := NewTokenizer()
	if err != nil {
		return nil, err
	}
	halves, err := readWeights(weightsBin)
	if err != nil {
		return nil, fmt.Errorf("reading the model weights: %w", err)
	}
	m := &Model{tok: tok, w: map[string]tensor{}, layers: map[string]linalg.Packed{}, kern: kern}
	for name, t := range halves {
		if strings.HasSuffix(name, ".kernel") {
			m.layers[name] = linalg.PackHalf(t.data, t.rows, t.cols, kern)
		} else {
			m.w[name] = tensor{rows: t.rows, cols: t.cols, data: linalg.Widen(t.data)}
		}
	}
	m.workspaces.New = func() any { return &workspace{} }
	return m, nil
}

// halfTensor is a tensor of IEEE 754 binary16 values, as stored.
type halfTensor struct {
	rows, cols int
	data       []uint16
}

func readWeights(b []byte) (map[string]halfTensor, error) {
	r := bytes.NewReader(b)
	magic := make([]byte, 4)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != "USEL" {
		return nil, errors.New("not a weights file")
	}
	var version, count uint32
	if err := binary.Read(r, binary.LittleEndian, &version); err != nil || version != 1 {
		return nil, fmt.Errorf("unsupported weights version %d", version)
	}
	if err := binary.Read(r, binary.LittleEndian, &count); err != nil {
		return nil, err
	}
	out := map[string]halfTensor{}
	for range count {
		var nameLen uint16
		if err := binary.Read(r, binary.LittleEndian, &nameLen); err != nil {
			return nil, err
		}
		name := make([]byte, nameLen)
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, err
		}
		var rank uint8
		if err := binary.Read(r, binary.LittleEndian, &rank); err != nil {
			return nil, err
		}
		dims := make([]uint32, rank)
		if err := binary.Read(r, binary.LittleEndian, dims); err != nil {
			return nil, err
		}
		t := halfTensor{rows: 1, cols: 1}
		switch rank {
		case 1:
			t.cols = int(dims[0])
		case 2:
			t.rows, t.cols = int(dims[0]), int(dims[1])
		default:
			return nil, fmt.Errorf("tensor %s has rank %d", name, rank)
		}
		t.data = make([]uint16, t.rows*t.cols)
		if err := binary.Read(r, binary.LittleEndian, t.data); err != nil {
			return nil, err
		}
		out[string(name)] = t
	}
	return out, nil
}

// Tokens returns the token ids the model sees for a text (at most
// MaxTokens).
func (m *Model) Tokens(text string) []int {
	ids := m.tok.Encode(text)
	if len(ids) > MaxTokens {
		ids = ids[:MaxTokens]
	}
	return ids
}

// Embed returns the text's unit-length 512-d embedding.
func (m *Model) Embed(text string) ([]float32, error) {
	ids := m.Tokens(text)
	if len(ids) == 0 {
		return nil, errors.New("nothing to embed: the text has no tokens")
	}
	n := len(ids)
	ws := m.workspaces.Get().(*workspace)
	ws.next = 0
	defer m.workspaces.Put(ws)

	// Input: each token's 256-d embedding plus a sinusoidal timing signal
	// of its position. The graph adds the embedding twice (once directly,
	// once with the timing signal), so the input is 2·embedding + timing.
	emb, timing := m.w["embeddings"], m.w["timing"]
	half := timing.cols
	x := ws.take(n * emb.cols)
	for p, id := range ids {
		row := x[p*emb.cols : (p+1)*emb.cols]
		e := emb.data[id*emb.cols : (id+1)*emb.cols]
		for i := range half {
			angle := float32(p) * timing.data[i]
			row[i] = 2*e[i] + float32(math.Sin(float64(angle)))
			row[half+i] = 2*e[half+i] + float32(math.Cos(float64(angle)))
		}
	}

	// Layer 0 works at 256 dimensions and widens to 512: its residual is
	// projected by a dense layer. Layer 1's tokens are averaged as it
	// ends (see pooledLayer).
	residual := m.dense(ws, x, n, "l0.residual")
	x = m.layer(ws, x, n, "l0", residual)
	pooled := m.pooledLayer(ws, x, n, "l1")

	// Tanh projection, L2 normalisation.
	out := make([]float32, Dimensions)
	var sum float32
	for i, v := range m.dense(ws, pooled, 1, "head") {
		out[i] = tanhf(v)
		sum += out[i] * out[i]
	}
	inv := float32(1 / math.Sqrt(float64(max(sum, 1e-12))))
	for i := range out {
		out[i] *= inv
	}
	return out, nil
}

// layer is one transformer layer with pre-normalisation: self-attention
// added to residual, then a ReLU feed-forward block added to its input.
func (m *Model) layer(ws *workspace, x []float32, n int, name string, residual []float32) []float32 {
	y := m.attend(ws, x, n, name, residual)
	h := m.dense(ws, m.widen(ws, y, n, name), n, name+".ffn2")
	for i := range h {
		h[i] += y[i]
	}
	return h
}

// pooledLayer is layer averaged over the tokens, as the model pools its
// last layer. The feed-forward block's second dense layer is linear, so
// it is applied once, to the mean of its inputs, instead of to each
// token's: the same vector up to the order of float32 sums, for a sixth
// of the model's arithmetic.
func (m *Model) pooledLayer(ws *workspace, x []float32, n int, name string) []float32 {
	y := m.attend(ws, x, n, name, x)
	h := m.widen(ws, y, n, name)
	meanY := mean(ws, y, n)
	pooled := m.dense(ws, mean(ws, h, n), 1, name+".ffn2")
	for i := range pooled {
		pooled[i] += meanY[i]
	}
	return pooled
}

// attend is a layer's self-attention, normalised before and added to
// residual after.
func (m *Model) attend(ws *workspace, x []float32, n int, name string, residual []float32) []float32 {
	width := m.w[name+".attn_norm.scale"].cols
	h := m.layerNorm(ws, x, n, width, name+".attn_norm")
	qkv := m.dense(ws, h, n, name+".qkv") // n × 3·width: queries, keys, values
	attn := m.attention(ws, qkv, n, width)
	y := m.dense(ws, attn, n, name+".out")
	for i := range y {
		y[i] += residual[i]
	}
	return y
}

// widen is the first half of a layer's feed-forward block: normalised,
// widened by a dense layer, through a ReLU.
func (m *Model) widen(ws *workspace, y []float32, n int, name string) []float32 {
	h := m.layerNorm(ws, y, n, Dimensions, name+".ffn_norm")
	h = m.dense(ws, h, n, name+".ffn1")
	for i, v := range h {
		h[i] = max(v, 0)
	}
	return h
}

// mean averages the n rows of x.
func mean(ws *workspace, x []float32, n int) []float32 {
	width := len(x) / n
	out := ws.take(width)
	for p := range n {
		for i, v := range x[p*width : (p+1)*width] {
			out[i] += v
		}
	}
	for i := range out {
		out[i] /= float32(n)
	}
	return out
}

// attention is multi-head scaled dot-product self-attention over the
// packed queries, keys and values (each width wide, in heads heads). Each
// head is two matrix products: the scaled queries by the keys transposed,
// and the softmax of that by the values. The keys are padded to whole
// panels of the matrix kernel with zero keys and values, which the
// softmax leaves out and which add nothing to the output.
func (m *Model) attention(ws *workspace, qkv []float32, n, width int) []float32 {
	dh := width / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	np := n
	if m.kern != nil {
		np = (n + m.kern.Width - 1) / m.kern.Width * m.kern.Width
	}
	out := ws.take(n * width)
	q, kt, v, o := ws.take(n*dh), ws.take(dh*np), ws.take(np*dh), ws.take(n*dh)
	keysBuf, valuesBuf := ws.take(dh*np), ws.take(np*dh)
	logits := ws.take(n * np)
	for hd := range heads {
		off := hd * dh
		for i := range n {
			row := qkv[i*3*width : (i+1)*3*width]
			for d := range dh {
				q[i*dh+d] = row[off+d] * scale
				kt[d*np+i] = row[width+off+d]
			}
			copy(v[i*dh:(i+1)*dh], row[2*width+off:2*width+off+dh])
		}
		clear(logits)
		linalg.PackInto(keysBuf, kt, dh, np, m.kern).MulAdd(logits, q, n)
		for i := range n {
			softmax(logits[i*np : i*np+n])
		}
		clear(o)
		linalg.PackInto(valuesBuf, v, np, dh, m.kern).MulAdd(o, logits, n)
		for i := range n {
			copy(out[i*width+off:i*width+off+dh], o[i*dh:(i+1)*dh])
		}
	}
	return out
}

// softmax turns logits into weights that sum to one, in place.
func softmax(logits []float32) {
	peak := float32(math.Inf(-1))
	for _, l := range logits {
		peak = max(peak, l)
	}
	var total float32
	for j, l := range logits {
		logits[j] = expf(l - peak)
		total += logits[j]
	}
	for j := range logits {
		logits[j] /= total
	}
}

// dense computes x·kernel + bias for n rows.
func (m *Model) dense(ws *workspace, x []float32, n int, name string) []float32 {
	k, b := m.layers[name+".kernel"], m.w[name+".bias"]
	out := ws.take(n * k.C)
	for i := range n {
		copy(out[i*k.C:(i+1)*k.C], b.data)
	}
	k.MulAdd(out, x, n)
	return out
}

// layerNorm normalises each row to zero mean and unit variance, then
// scales and shifts it.
func (m *Model) layerNorm(ws *workspace, x []float32, n, width int, name string) []float32 {
	scale, bias := m.w[name+".scale"].data, m.w[name+".bias"].data
	out := ws.take(len(x))
	for r := range n {
		row := x[r*width : (r+1)*width]
		var mean float32
		for _, v := range row {
			mean += v
		}
		mean /= float32(width)
		var variance float32
		for _, v := range row {
			variance += (v - mean) * (v - mean)
		}
		variance /= float32(width)
		inv := float32(1 / math.Sqrt(float64(variance+layerNormEpsilon)))
		o := out[r*width : (r+1)*width]
		for i, v := range row {
			o[i] = scale[i]*inv*(v-mean) + bias[i]
		}
	}
	return out
}
