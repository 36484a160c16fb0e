//! tokensieve
