"""Inference-engine connectors over stratakv (docs/connectors.md):

  stratakv.integrations.sglang.StratakvHiCacheStorage   SGLang HiCache L3 storage backend
                                                        (--hicache-storage-backend dynamic)
  stratakv.integrations.lmcache.StratakvConnector       LMCache remote connector (vLLM through
                                                        LMCache; remote_url external://...)

Each derives from the engine's own base class when the engine is installed, else from a
stand-in with the same methods (_sglang_base, _lmcache_base). Import the one you need; this
package imports neither.
"""
