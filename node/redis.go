package node

import (
	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/configs"
)

// newRedisClient builds the go-redis client from the config: a cluster
// client with redis.cluster, else a single-server client.
func newRedisClient(c configs.RedisConfig) redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:         c.Addrs,
		IsClusterMode: c.Cluster,
		Username:      c.Username,
		Password:      string(c.Password),
		DB:            c.DB,
		DialTimeout:   c.DialTimeout.D(),
		ReadTimeout:   c.ReadTimeout.D(),
		WriteTimeout:  c.WriteTimeout.D(),
		PoolSize:      c.PoolSize,
		MaxRetries:    1,
	})
}
