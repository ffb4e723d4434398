"""`python -m console.bench.loadgen`: the documented command line of the load generator.

The load generator itself is the top-level `loadgen` package (pure asyncio, no Django); this
package only keeps the name docs/architecture.md#stable-interfaces gives operators and scripts
working.
"""
