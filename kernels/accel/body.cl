/* sparsetune accelerator kernels: the body shared by every backend.
   The backend header defines KERNEL, GLOBAL, DEVFN, LOCAL_ARRAY, GLOBAL_ID,
   LOCAL_ID, GROUP_ID, BARRIER, ATOMIC_ADD_F32 and FMA; Source defines WG (the
   work-group size mttkrp_alto is launched with), CHUNK (entries per
   work-item in the COO kernels) and MAX_ORDER. Matrices are row-major with
   R columns; offsets into them are ulong, as a factor can exceed 2^32
   floats. */

KERNEL void fill_zero(ulong n, GLOBAL float *p) {
	ulong i = GLOBAL_ID;
	if (i < n)
		p[i] = 0.0f;
}

/* SpTTM, CSR: work-item (row r, column j) computes Y[r][j]. */
KERNEL void spttm_csr(uint rows, uint R, GLOBAL const uint *rowptr, GLOBAL const uint *col,
                      GLOBAL const float *val, GLOBAL const float *ut, GLOBAL float *y) {
	ulong g = GLOBAL_ID;
	ulong r = g / R;
	uint j = (uint)(g % R);
	if (r >= rows)
		return;
	float s = 0.0f;
	for (uint k = rowptr[r]; k < rowptr[r + 1]; k++)
		s += val[k] * ut[(ulong)col[k] * R + j];
	y[r * R + j] = s;
}

/* SpTTM, ELL: slot k of row r is at k*rows + r; padding slots hold 0. */
KERNEL void spttm_ell(uint rows, uint width, uint R, GLOBAL const uint *col,
                      GLOBAL const float *val, GLOBAL const float *ut, GLOBAL float *y) {
	ulong g = GLOBAL_ID;
	ulong r = g / R;
	uint j = (uint)(g % R);
	if (r >= rows)
		return;
	float s = 0.0f;
	for (uint k = 0; k < width; k++) {
		ulong e = (ulong)k * rows + r;
		s += val[e] * ut[(ulong)col[e] * R + j];
	}
	y[r * R + j] = s;
}

/* SpTTM, COO sorted by row: work-item (chunk c, column j) takes entries
   c*CHUNK to c*CHUNK+CHUNK-1, adds up each run of one row and flushes the
   run with one atomic add, so Y must hold zeros (or the ELL part of a HYB)
   beforehand. */
KERNEL void spttm_coo(uint nnz, uint R, GLOBAL const uint *row, GLOBAL const uint *col,
                      GLOBAL const float *val, GLOBAL const float *ut, GLOBAL float *y) {
	ulong g = GLOBAL_ID;
	ulong k = (g / R) * CHUNK;
	uint j = (uint)(g % R);
	if (k >= nnz)
		return;
	ulong end = k + CHUNK < (ulong)nnz ? k + CHUNK : (ulong)nnz;
	uint cur = row[k];
	float s = 0.0f;
	for (; k < end; k++) {
		uint r = row[k];
		if (r != cur) {
			ATOMIC_ADD_F32(&y[(ulong)cur * R + j], s);
			cur = r;
			s = 0.0f;
		}
		s += val[k] * ut[(ulong)col[k] * R + j];
	}
	ATOMIC_ADD_F32(&y[(ulong)cur * R + j], s);
}

/* MTTKRP, COO sorted by the output mode. inds holds the index arrays of all
   modes, mode-major (mode m's at m*nnz); meta[m] is the offset of mode m's
   factor in fac. Runs of one output row are flushed as in spttm_coo. */
KERNEL void mttkrp_coo(uint nnz, uint R, uint order, uint mode, GLOBAL const uint *inds,
                       GLOBAL const float *val, GLOBAL const float *fac, GLOBAL const ulong *meta,
                       GLOBAL float *out) {
	ulong g = GLOBAL_ID;
	ulong k = (g / R) * CHUNK;
	uint j = (uint)(g % R);
	if (k >= nnz)
		return;
	ulong end = k + CHUNK < (ulong)nnz ? k + CHUNK : (ulong)nnz;
	GLOBAL const uint *outInd = inds + (ulong)mode * nnz;
	uint cur = outInd[k];
	float s = 0.0f;
	for (; k < end; k++) {
		uint r = outInd[k];
		if (r != cur) {
			ATOMIC_ADD_F32(&out[(ulong)cur * R + j], s);
			cur = r;
			s = 0.0f;
		}
		float p = val[k];
		for (uint m = 0; m < order; m++)
			if (m != mode)
				p *= fac[meta[m] + (ulong)inds[(ulong)m * nnz + k] * R + j];
		s += p;
	}
	ATOMIC_ADD_F32(&out[(ulong)cur * R + j], s);
}

/* CP-APR's Φ of the output mode, COO (sorted by that mode for fewest
   atomic updates; any order is correct): work-item c takes entries
   c*CHUNK to c*CHUNK+CHUNK-1 with all R columns in private arrays. For an
   entry with value x at output row i, π is the product of the other modes'
   factor rows, m = <B(i, :), π> the model's value there, and x / max(m, eps)
   times π is added to the run's sum; a run of one output row is flushed
   with R atomic adds, so out must hold zeros beforehand. R is at most
   PHI_MAX_RANK. */
KERNEL void phi_coo(uint nnz, uint R, uint order, uint mode, float eps, GLOBAL const uint *inds,
                    GLOBAL const float *val, GLOBAL const float *fac, GLOBAL const ulong *meta,
                    GLOBAL const float *b, GLOBAL float *out) {
	ulong k = GLOBAL_ID * CHUNK;
	if (k >= nnz)
		return;
	ulong end = k + CHUNK < (ulong)nnz ? k + CHUNK : (ulong)nnz;
	GLOBAL const uint *outInd = inds + (ulong)mode * nnz;
	float pi[PHI_MAX_RANK];
	float s[PHI_MAX_RANK];
	for (uint j = 0; j < R; j++)
		s[j] = 0.0f;
	uint cur = outInd[k];
	for (; k < end; k++) {
		uint r = outInd[k];
		if (r != cur) {
			for (uint j = 0; j < R; j++) {
				ATOMIC_ADD_F32(&out[(ulong)cur * R + j], s[j]);
				s[j] = 0.0f;
			}
			cur = r;
		}
		for (uint j = 0; j < R; j++)
			pi[j] = 1.0f;
		for (uint m = 0; m < order; m++) {
			if (m == mode)
				continue;
			GLOBAL const float *row = fac + meta[m] + (ulong)inds[(ulong)m * nnz + k] * R;
			for (uint j = 0; j < R; j++)
				pi[j] *= row[j];
		}
		GLOBAL const float *br = b + (ulong)r * R;
		float mv = 0.0f;
		for (uint j = 0; j < R; j++)
			mv = FMA(br[j], pi[j], mv);
		float w = val[k] / (mv > eps ? mv : eps);
		for (uint j = 0; j < R; j++)
			s[j] = FMA(w, pi[j], s[j]);
	}
	for (uint j = 0; j < R; j++)
		ATOMIC_ADD_F32(&out[(ulong)cur * R + j], s[j]);
}

/* MTTKRP, CSF rooted at the output mode: work-item (root fiber f, column j)
   walks f's subtree depth first. prod[l] is the product of the factor
   entries of the fibers on the path down to level l, so each interior
   fiber's entry is read once per visit, and a leaf run is summed before it
   is multiplied by its parents' product. Root fibers have distinct indices,
   so the work-item owns its output row. The levels' pointer and index
   arrays are concatenated in ptr and idx; meta holds, per level, the
   offset of the level's factor in fac (order entries), of its pointers in
   ptr (order-1) and of its indices in idx (order). */
KERNEL void mttkrp_csf(uint nroots, uint R, uint order, GLOBAL const uint *ptr, GLOBAL const uint *idx,
                       GLOBAL const float *val, GLOBAL const float *fac, GLOBAL const ulong *meta,
                       GLOBAL float *out) {
	ulong g = GLOBAL_ID;
	ulong f = g / R;
	uint j = (uint)(g % R);
	if (f >= nroots)
		return;
	GLOBAL const ulong *facoff = meta;
	GLOBAL const ulong *ptroff = meta + order;
	GLOBAL const ulong *idxoff = meta + 2 * order - 1;
	uint last = order - 1;
	ulong pos[MAX_ORDER], end[MAX_ORDER];
	float prod[MAX_ORDER];
	float acc = 0.0f;
	prod[0] = 1.0f;
	pos[1] = ptr[ptroff[0] + f];
	end[1] = ptr[ptroff[0] + f + 1];
	uint l = 1;
	while (l > 0) {
		if (pos[l] >= end[l]) {
			l--;
			if (l > 0)
				pos[l]++;
			continue;
		}
		if (l == last) {
			float s = 0.0f;
			for (ulong k = pos[l]; k < end[l]; k++)
				s += val[k] * fac[facoff[l] + (ulong)idx[idxoff[l] + k] * R + j];
			acc += prod[l - 1] * s;
			pos[l] = end[l];
			continue;
		}
		ulong k = pos[l];
		prod[l] = prod[l - 1] * fac[facoff[l] + (ulong)idx[idxoff[l] + k] * R + j];
		pos[l + 1] = ptr[ptroff[l] + k];
		end[l + 1] = ptr[ptroff[l] + k + 1];
		l++;
	}
	out[(ulong)idx[idxoff[0] + f] * R + j] = acc;
}

/* compress_bits gathers the set bits of x (already masked) to the low end
   with the six move masks s[0..5] of formats.ALTOMode. */
DEVFN ulong compress_bits(ulong x, GLOBAL const ulong *s) {
	ulong t;
	t = x & s[0]; x = (x ^ t) | (t >> 1);
	t = x & s[1]; x = (x ^ t) | (t >> 2);
	t = x & s[2]; x = (x ^ t) | (t >> 4);
	t = x & s[3]; x = (x ^ t) | (t >> 8);
	t = x & s[4]; x = (x ^ t) | (t >> 16);
	t = x & s[5]; x = (x ^ t) | (t >> 32);
	return x;
}

/* ALTO_META is the number of ulongs per mode in mttkrp_alto's meta:
   Lo, Hi, LoBits, factor offset, LoSteps[6], HiSteps[6]. */
#define ALTO_META ALTO_META_N

/* MTTKRP, ALTO: nonzeros first to first+n-1 of lin and val, all of one
   block, whose linear indices have high word hi. Work-item t of a
   work-group decodes nonzero first+GROUP_ID*WG+t; then,
   for each column j, every work-item puts its nonzero's product in local
   memory and the first work-item of each run of equal output rows adds the
   run up and makes the one atomic update. */
KERNEL void mttkrp_alto(ulong first, uint n, uint R, uint order, uint mode, ulong hi, GLOBAL const ulong *lin,
                        GLOBAL const float *val, GLOBAL const float *fac, GLOBAL const ulong *meta,
                        GLOBAL float *out) {
	LOCAL_ARRAY(uint, rows, WG);
	LOCAL_ARRAY(float, part, WG);
	uint t = LOCAL_ID;
	ulong k = GROUP_ID * WG + t;
	int live = k < n;
	k += first;
	uint ind[MAX_ORDER];
	float v = 0.0f;
	uint row = 0xffffffffu; /* no index reaches it: dims are below 2^32 */
	if (live) {
		ulong x = lin[k];
		v = val[k];
		for (uint m = 0; m < order; m++) {
			GLOBAL const ulong *e = meta + ALTO_META * m;
			ind[m] = (uint)(compress_bits(x & e[0], e + 4) | (compress_bits(hi & e[1], e + 10) << e[2]));
		}
		row = ind[mode];
	}
	rows[t] = row;
	BARRIER();
	int head = live && (t == 0 || rows[t - 1] != row);
	for (uint j = 0; j < R; j++) {
		float p = v;
		if (live)
			for (uint m = 0; m < order; m++)
				if (m != mode)
					p *= fac[meta[ALTO_META * m + 3] + (ulong)ind[m] * R + j];
		part[t] = p;
		BARRIER();
		if (head) {
			float s = p;
			for (uint u = t + 1; u < WG && rows[u] == row; u++)
				s += part[u];
			ATOMIC_ADD_F32(&out[(ulong)row * R + j], s);
		}
		BARRIER();
	}
}

/* Calibration probe of the peak multiply-add rate: 8 (accel.FMAChains)
   independent chains per work-item, iters rounds each. With 0 < b < 1 the
   chains converge to c/(1-b) and stay finite; the sum is stored so that no
   compiler drops the work. */
KERNEL void fma_peak(uint iters, float b, float c, GLOBAL float *out) {
	ulong g = GLOBAL_ID;
	float x0 = (float)(g & 1023) * 1e-3f;
	float x1 = x0 + 0.125f, x2 = x0 + 0.25f, x3 = x0 + 0.375f;
	float x4 = x0 + 0.5f, x5 = x0 + 0.625f, x6 = x0 + 0.75f, x7 = x0 + 0.875f;
	for (uint i = 0; i < iters; i++) {
		x0 = FMA(x0, b, c);
		x1 = FMA(x1, b, c);
		x2 = FMA(x2, b, c);
		x3 = FMA(x3, b, c);
		x4 = FMA(x4, b, c);
		x5 = FMA(x5, b, c);
		x6 = FMA(x6, b, c);
		x7 = FMA(x7, b, c);
	}
	out[g] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}

/* Calibration probe of the memory bandwidth: the STREAM triad. */
KERNEL void triad(ulong n, float s, GLOBAL float *a, GLOBAL const float *b, GLOBAL const float *c) {
	ulong i = GLOBAL_ID;
	if (i < n)
		a[i] = b[i] + s * c[i];
}
